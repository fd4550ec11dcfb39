"""The upstream's commit ids stay the ids: a commit fetched from an upstream Hub keeps
the tag ``ocibridge-upstream-<its upstream id>`` (oci/bookkeeping.py) beside serve's own commit
tag, and its manifest says the id in ``org.opencontainers.image.revision`` (as every ``push hf:``
does). A revision resolves by that id, and answers it as ``sha`` and ``X-Repo-Commit``, when the
tag names that very manifest: the mapping lives in the registry, so it survives a restart and is
the same for every serve over it."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ocibridge.errors import InvalidReference, NotFound
from ocibridge.hubserver.repo.tombstone import is_tombstone
from ocibridge.kinds.hf.kind import REVISION_ANNOTATION
from ocibridge.oci.bookkeeping import UPSTREAM_TAG_PREFIX, upstream_tag

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.sources import Repository
    from ocibridge.oci.models import Descriptor, Manifest

_SHA = re.compile(r"[0-9a-f]{40}")
#: the manifest annotation of a fetched commit that says the upstream's ``createdAt`` of the
#: repository (its ``lastModified`` is the commit's ``org.opencontainers.image.created``)
REPO_CREATED = "io.ocibridge.upstream.repo-created"
#: upstream tags read to list a repository's refs with the upstream's ids (past it: serve's ids)
MAX_UPSTREAM_TAGS = 200


def upstream_commit(repo: Repository, top: Descriptor, manifest: Manifest) -> str | None:
    """The upstream's id of the commit ``top`` (whose model manifest is ``manifest``); None when
    it is no commit fetched from an upstream (the manifest names no revision, or no upstream tag
    of that revision names ``top``)."""
    said = (manifest.annotations or {}).get(REVISION_ANNOTATION, "")
    if not isinstance(said, str) or not _SHA.fullmatch(said):
        return None
    with contextlib.suppress(NotFound, InvalidReference):
        if repo.store.resolve(repo.reference(upstream_tag(said))).digest == top.digest:
            return said
    return None


def by_upstream_id(repo: Repository, commit: str) -> Descriptor:
    """The manifest the upstream's commit id ``commit`` names in ``repo``; :class:`NotFound`
    when none was fetched (or ``commit`` is no whole id)."""
    if not _SHA.fullmatch(commit):
        raise NotFound(f"{repo.shown}: {commit} is no upstream commit id")
    found = repo.store.resolve(repo.reference(upstream_tag(commit)))
    if is_tombstone(found.digest):  # dropped (hubserver/lifetimes/): fetched again when asked
        raise NotFound(f"{repo.shown}: the upstream's {commit} was dropped")
    return found


def is_proxied(repo: Repository) -> bool:
    """Whether ``repo`` holds commits fetched from an upstream (a repository made here never
    takes commits from one: the two histories would mix)."""
    try:
        return any(tag.startswith(UPSTREAM_TAG_PREFIX) for tag in repo.tags())
    except NotFound:
        return False


def upstream_ids(repo: Repository, tags: Sequence[str]) -> dict[str, str]:
    """Serve's commit id -> the upstream's, of each commit the upstream gave (``tags``: every tag
    of ``repo``; its upstream tags are read, one HEAD each), so that refs name commits as
    model_info's ``sha`` names them."""
    from ocibridge.hubserver.repo.sources import commit_of

    ids: dict[str, str] = {}
    for tag in [t for t in tags if t.startswith(UPSTREAM_TAG_PREFIX)][:MAX_UPSTREAM_TAGS]:
        said = tag[len(UPSTREAM_TAG_PREFIX):]
        with contextlib.suppress(NotFound, InvalidReference):
            digest = repo.store.resolve(repo.reference(tag)).digest
            if not is_tombstone(digest):
                ids[commit_of(digest)] = said
    return ids
