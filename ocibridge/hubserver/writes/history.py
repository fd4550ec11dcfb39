"""A branch's commits as ``list_repo_commits`` reads them: the head's manifest, then its parent's
(the :data:`.commits.PARENT` annotation serve writes: the parent manifest's digest), and so on.

A manifest pushed outside serve has no parent annotation: it is the first commit listed. An old
manifest the registry no longer holds (untagged and collected) ends the walk there.
"""

from __future__ import annotations

import json
from typing import Any

from ocibridge.errors import InvalidReference, NotFound, OcibridgeError
from ocibridge.hubserver.reading.catalog import Resolved
from ocibridge.hubserver.reading.sources import CREATED, commit_of
from ocibridge.hubserver.writes.commits import AUTHOR, DESCRIPTION, PARENT, SUMMARY

#: commits listed at most
COMMITS_MAX = 1000
#: the date of a commit whose manifest records none (the client needs one)
NO_DATE = "1970-01-01T00:00:00.000Z"
#: bytes of a manifest read for its annotations
MANIFEST_MAX = 4 * 1024 * 1024


def walk(head: Resolved) -> list[tuple[str, dict[str, Any]]]:
    """The manifests of the branch ``head`` is the head of, newest first: (digest, annotations),
    each manifest's parent the next (what :func:`commits` and the web history page list)."""
    store = head.repo.store
    found: list[tuple[str, dict[str, Any]]] = []
    digest: str | None = head.top.digest
    seen: set[str] = set()
    while digest is not None and digest not in seen and len(found) < COMMITS_MAX:
        seen.add(digest)
        try:
            desc = store.resolve(digest)
            if desc.size > MANIFEST_MAX:
                break
            annotations = json.loads(store.fetch_bytes(desc)).get("annotations") or {}
        except (NotFound, InvalidReference, OcibridgeError, ValueError, AttributeError):
            break
        if not isinstance(annotations, dict):
            annotations = {}
        found.append((digest, annotations))
        parent = annotations.get(PARENT)
        digest = parent if isinstance(parent, str) and parent.startswith("sha256:") else None
    return found


def commits(head: Resolved) -> list[dict[str, Any]]:
    """The commits of the branch ``head`` is the head of, newest first (the Hub's shape)."""
    found: list[dict[str, Any]] = []
    for digest, notes in walk(head):
        author = notes.get(AUTHOR)
        found.append({
            "id": commit_of(digest),
            "title": str(notes.get(SUMMARY, "pushed outside serve")),
            "message": str(notes.get(DESCRIPTION, "")),
            "authors": [{"user": str(author)}] if author else [],
            "date": str(notes.get(CREATED) or NO_DATE),
        })
    return found
