"""A tag ``ocibridge serve`` deleted, told as that: serve's ``delete_branch``,
``delete_tag`` and ``delete_repo`` (and ``move_repo``, for the old name) move the registry tag to
serve's tombstone manifest (oci/bookkeeping.py, :data:`TOMBSTONE_ARTIFACT_TYPE`) rather than
delete it. That manifest names no file, so ``pull`` of such a tag wrote "0 files" and exited 0.

The tombstone is the same bytes in every repository, so a resolved digest tells it with no
request; only a refusal reads the repository's refs record (``ocibridge-refs``), for the one
field a user needs: ``moved``, the repository id ``move_repo`` moved it to. The bytes are built
here, below serve, which writes them (hubserver/repo/tombstone.py): the CLI does not import serve."""

from __future__ import annotations

import json

from ocibridge.errors import NotFound, OcibridgeError
from ocibridge.oci.bookkeeping import REFS_LAYER_TYPE, REFS_TAG, TOMBSTONE_ARTIFACT_TYPE, is_bookkeeping
from ocibridge.oci.empty import empty_descriptor
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.base import ReadableStore

#: serve's tombstone manifest (the empty descriptor as its config and one layer), the same bytes
#: in every repository, and its descriptor and digest
TOMBSTONE_BODY = Manifest(mediaType=OCI_MANIFEST, artifactType=TOMBSTONE_ARTIFACT_TYPE, config=empty_descriptor(),
                          layers=[empty_descriptor()]).to_json_bytes()
TOMBSTONE = Descriptor.for_bytes(OCI_MANIFEST, TOMBSTONE_BODY)
TOMBSTONE_DIGEST = TOMBSTONE.digest
#: the most of a refs record read for its ``moved`` field (serve's are a few hundred bytes)
_RECORD_MAX = 1 << 20


class DeletedThroughServe(OcibridgeError):
    """A reference whose tag serve deleted (it names the tombstone, not a model)."""


def refuse_tombstone(store: ReadableStore, desc: Descriptor, shown: str) -> None:
    """Raise :class:`DeletedThroughServe` when ``desc`` (what ``shown`` resolved to) is serve's
    tombstone, saying where the repository moved when its refs record says so."""
    if desc.digest != TOMBSTONE_DIGEST:
        return
    moved = _moved_to(store)
    where = f"; the repository moved to {moved}" if moved else ""
    raise DeletedThroughServe(f"{shown} was deleted through serve (delete_branch, delete_tag or delete_repo){where}")


def _moved_to(store: ReadableStore) -> str:
    """The refs record's ``moved`` (a repo id), or "" when there is none or it cannot be read:
    the refusal stands either way, this only adds where to look."""
    try:
        record = store.resolve(REFS_TAG)
        node = parse_manifest_bytes(store.fetch_bytes(record), record.mediaType)
        if not isinstance(node, Manifest):
            return ""
        layer = next((d for d in node.layers if d.mediaType == REFS_LAYER_TYPE and d.size <= _RECORD_MAX), None)
        doc = json.loads(store.fetch_bytes(layer)) if layer is not None else None
    except (OcibridgeError, ValueError, OSError):
        return ""
    moved = doc.get("moved") if isinstance(doc, dict) else None
    return moved if isinstance(moved, str) and moved.count("/") == 1 and moved.isprintable() else ""


def without_tombstones(store: ReadableStore, tags: list[str]) -> list[str]:
    """``tags`` less those naming serve's tombstone. Only a repository serve keeps a refs record
    in has any: elsewhere nothing is asked; there, one ``HEAD`` a version tag (bookkeeping
    tags, hidden anyway, are not asked)."""
    if REFS_TAG not in tags:
        return tags
    return [tag for tag in tags if is_bookkeeping(tag) or not _names_tombstone(store, tag)]


def _names_tombstone(store: ReadableStore, tag: str) -> bool:
    try:
        return store.resolve(tag).digest == TOMBSTONE_DIGEST
    except NotFound:  # deleted since the listing: gone, as a tombstone is
        return True
