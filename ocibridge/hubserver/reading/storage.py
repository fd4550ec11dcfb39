"""The rows of ``GET /api/settings/repositories`` and ``/api/organizations/{ns}/settings/repositories``:
a namespace's repositories with the storage each takes, as the Hub lists them for ``hf repos ls``
(huggingface_hub 2.4, ``HfApi.list_user_repos``; the route: :meth:`.routes.ReadRoutes.repositories`).

The user's namespace is the token's user name (the one ``whoami`` answers); an organization's is
the one named. Only repositories the token reads are listed (a private one under the private
scope only), as in every listing of serve; a deleted or moved one is not. A repository's storage
is the size of its main branch's files; its date the commit's; one with no commit yet stores
nothing and shows the epoch.
"""

from __future__ import annotations

from typing import Any

from ocibridge.hubserver.repo.catalog import Resolved
from ocibridge.hubserver.repo.files import ModelFiles
from ocibridge.hubserver.repo.hubjson import hub_date
from ocibridge.hubserver.repo.reponames import hub_id, type_of

EPOCH = "1970-01-01T00:00:00.000Z"


def under(namespace: str, repo_id: str) -> bool:
    """Whether the repository keyed ``repo_id`` (repo/reponames.py: a model or a dataset) is in
    ``namespace`` (case-insensitively, as the Hub's ids)."""
    return hub_id(repo_id).lower().startswith(namespace.lower().rstrip("/") + "/")


def storage_row(repo_id: str, private: bool, main: tuple[Resolved, ModelFiles] | None) -> dict[str, Any]:
    """One repository's row (``main``: its main branch and files, None when it has no commit)."""
    storage, updated = 0, EPOCH
    if main is not None:
        storage = sum(f.size for f in main[1].files.values())
        updated = hub_date(main[0].created) or EPOCH
    return {"id": hub_id(repo_id), "type": type_of(repo_id), "updatedAt": updated,
            "visibility": "private" if private else "public", "storage": storage}


def with_shares(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row with ``storagePercent``: its share of the namespace's storage."""
    total = sum(r["storage"] for r in rows)
    return [{**r, "storagePercent": round(100 * r["storage"] / total, 2) if total else 0} for r in rows]
