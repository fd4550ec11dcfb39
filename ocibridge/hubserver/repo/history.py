"""A branch's commits as ``list_repo_commits`` reads them: the head's manifest, then its parent's
(the :data:`.commits.PARENT` annotation serve writes: the parent manifest's digest), and so on.

A manifest pushed outside serve has no parent annotation: it is the first commit listed. Every
commit serve writes has its own tag (:mod:`.landing`), so a registry's garbage collection keeps
the chain; a manifest the registry no longer holds (deleted by hand, or untagged by a serve from
before those tags and collected) ends the walk there.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ocibridge.core import boundedjson
from ocibridge.errors import InvalidReference, NotFound, OcibridgeError
from ocibridge.hubserver.repo.catalog import Resolved
from ocibridge.hubserver.repo.commits import AUTHOR, DESCRIPTION, PARENT, SUMMARY
from ocibridge.hubserver.repo.hubjson import hub_date
from ocibridge.hubserver.repo.sources import CREATED, commit_of

if TYPE_CHECKING:
    from ocibridge.stores.base import ReadableStore

#: commits listed at most
COMMITS_MAX = 1000
#: the date of a commit whose manifest records none (the client needs one)
NO_DATE = "1970-01-01T00:00:00.000Z"
#: bytes of a manifest read for its annotations
MANIFEST_MAX = 4 * 1024 * 1024


def walk(head: Resolved) -> list[tuple[str, dict[str, Any]]]:
    """The manifests of the branch ``head`` is the head of, newest first: (digest, annotations),
    each manifest's parent the next (what :func:`commits` and the web history page list)."""
    return list(itertools.islice(chain(head.repo.store, head.top.digest), COMMITS_MAX))


def chain(store: ReadableStore, digest: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
    """The manifest ``digest`` and its ancestors, read one at a time, newest first: (digest,
    annotations); ends at a manifest without a parent, one the store no longer holds, or a loop."""
    seen: set[str] = set()
    while digest is not None and digest not in seen:
        seen.add(digest)
        doc = read_manifest(store, digest)
        if doc is None:
            return
        annotations = annotations_of(doc)
        yield digest, annotations
        digest = parent_of(annotations)


def read_manifest(store: ReadableStore, digest: str) -> dict[str, Any] | None:
    """The manifest ``digest`` as JSON (at most :data:`MANIFEST_MAX` bytes, checked against its
    digest by the store); None when the store no longer holds it or it is no JSON object."""
    try:
        desc = store.resolve(digest)
        if desc.size > MANIFEST_MAX:
            return None
        doc = boundedjson.loads(store.fetch_bytes(desc))
    except (NotFound, InvalidReference, OcibridgeError, ValueError, AttributeError):
        return None
    return doc if isinstance(doc, dict) else None


def annotations_of(doc: dict[str, Any]) -> dict[str, Any]:
    annotations = doc.get("annotations") or {}
    return annotations if isinstance(annotations, dict) else {}


def parent_of(annotations: dict[str, Any]) -> str | None:
    """The parent manifest's digest serve annotated (:data:`.commits.PARENT`), or None."""
    parent = annotations.get(PARENT)
    return parent if isinstance(parent, str) and parent.startswith("sha256:") else None


def commit_entry(digest: str, notes: dict[str, Any], head: Resolved | None = None) -> dict[str, Any]:
    """A commit as the Hub names one (id, title, date): in a commit list and as a file's
    ``lastCommit`` (:mod:`ocibridge.hubserver.repo.lastcommits`). The date as the Hub writes one (``...000Z``).
    The id of ``head``'s own manifest is the one it resolved to (a commit fetched from an upstream:
    the upstream's id, as ``sha`` says it)."""
    named = head.commit if head is not None and digest == head.top.digest else commit_of(digest)
    return {"id": named, "title": str(notes.get(SUMMARY, "pushed outside serve")),
            "date": hub_date(str(notes.get(CREATED) or "")) or NO_DATE}


def commits(head: Resolved, formatted: bool = False) -> list[dict[str, Any]]:
    """The commits of the branch ``head`` is the head of, newest first (the Hub's shape);
    ``formatted``: with the title and message as HTML too (``expand[]=formatted``, which
    ``list_repo_commits(formatted=True)`` reads under ``formatted``: plain text, escaped)."""
    found: list[dict[str, Any]] = []
    for digest, notes in walk(head):
        author = notes.get(AUTHOR)
        entry = commit_entry(digest, notes, head)
        entry.update({"message": str(notes.get(DESCRIPTION, "")),
                      "authors": [{"user": str(author)}] if author else []})
        if formatted:
            entry["formatted"] = {"title": html.escape(entry["title"]), "message": html.escape(entry["message"])}
        found.append(entry)
    return found
