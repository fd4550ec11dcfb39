"""Files a commit packed into a tar layer (push's grouping: more than 64 small files of one kind
share one), found again without the layer's bytes.

serve records where each such file lies when it commits it, in one annotation of the commit's
manifest, :data:`GROUPED`: compact JSON ``{path: [layer index, offset, size, sha256, mode]}``.
Never in the layers, which stay byte for byte push's. A listing is then the manifest alone, and a
file is read back as a range of its layer (:class:`Member`), checked against its own SHA-256. A
manifest without the record (pushed outside serve), or with one that does not hold, has its tar
layers' files listed from the model cache's snapshot, as any pull would read them.

A commit whose group would hold a large file (:data:`GROUPED_MAX`) groups nothing: serve sends
such a file to the registry as its own blob while it arrives, and a group would send it again.
"""

from __future__ import annotations

import io
import json
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol, runtime_checkable

from ocibridge.core import boundedjson
from ocibridge.core.fsutil import safe_relpath
from ocibridge.errors import OcibridgeError
from ocibridge.model.packing import BLOCK, tar_offsets
from ocibridge.oci.digest import verified
from ocibridge.oci.mediatypes import Variant, parse_layer_media_type
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.ranged import RangedBlobSource

if TYPE_CHECKING:
    from ocibridge.cache.modelcache import ModelCache
    from ocibridge.model.builder import PlannedLayer
    from ocibridge.stores.base import ReadableStore

#: the manifest annotation that places a commit's grouped files in its tar layers
GROUPED = "io.ocibridge.commit.grouped"
#: a commit holding a file from this size in a group push would make groups nothing (one raw layer
#: a file, unlike push): serve sends such a file to the registry as its own blob while it arrives
#: (uploads/relay.py), and a group would send it again, and read it back for every later commit
GROUPED_MAX = 8 * 1024 * 1024
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(kw_only=True)
class Member(Descriptor):
    """One file of a tar layer as a blob of its own: its digest and size, its bytes at ``offset``
    of the layer ``within`` (read by a range of it: :class:`.heldmanifests.ServedRegistryStore`)."""

    within: Descriptor
    offset: int
    mode: int = 0o644


@runtime_checkable
class ReadsMembers(Protocol):
    """A store that reads a :class:`Member` by a range of its layer (its ``open_blob`` takes one too)."""

    def open_member(self, member: Member) -> BinaryIO:
        """The member's bytes, checked against its own digest as they are read."""
        ...


def too_large(layers: Sequence[PlannedLayer]) -> bool:
    """Whether a tar layer of ``layers`` would hold a file of :data:`GROUPED_MAX` or more."""
    return any(layer.variant is not Variant.RAW and any(f.size >= GROUPED_MAX for f in layer.files)
               for layer in layers)


def record(layers: Sequence[PlannedLayer]) -> str | None:
    """The value of :data:`GROUPED` for ``layers`` (the plan the manifest is built from, in its
    order); None when no layer is a plain tar."""
    entries: dict[str, list[int | str]] = {}
    for index, layer in enumerate(layers):
        if layer.variant is not Variant.TAR:
            continue
        offsets = tar_offsets(layer.files)
        for f in layer.files:
            if f.path in offsets and f.digest is not None:
                entries[f.path] = [index, offsets[f.path], f.size, f.digest.removeprefix("sha256:"), f.mode]
    if not entries:
        return None
    return json.dumps(dict(sorted(entries.items(), key=lambda e: e[0].encode())), separators=(",", ":"))


def members(manifest: Manifest) -> dict[str, Member]:
    """path -> :class:`Member` of the files ``manifest``'s record places; {} when it has none, or
    when any entry does not hold (a layer that is no plain tar, a range past its end, a path
    that is not a safe relative one): then none of it is used."""
    text = (manifest.annotations or {}).get(GROUPED)
    if not isinstance(text, str):
        return {}
    try:
        found = boundedjson.loads(text)
        if not isinstance(found, dict):
            return {}
        return {path: _member(manifest, path, entry) for path, entry in found.items()}
    except (ValueError, RecursionError, OcibridgeError):
        return {}


def _member(manifest: Manifest, path: object, entry: object) -> Member:
    if not (isinstance(path, str) and isinstance(entry, list) and len(entry) == 5):
        raise ValueError("not an entry")
    index, offset, size, sha256, mode = entry
    if not all(type(n) is int for n in (index, offset, size, mode)) or not isinstance(sha256, str):
        raise ValueError("not an entry")
    if not 0 <= index < len(manifest.layers) or safe_relpath(path, "grouped file path") != path:
        raise ValueError("not a place")
    layer = manifest.layers[index]
    kind = parse_layer_media_type(layer.mediaType)
    if kind is None or kind.variant is not Variant.TAR or not _SHA256.fullmatch(sha256):
        raise ValueError("not a plain tar layer")
    if offset < BLOCK or offset % BLOCK or size < 0 or offset + size > layer.size:
        raise ValueError("not inside its layer")
    return Member(mediaType=layer.mediaType, digest=f"sha256:{sha256}", size=size, within=layer,
                  offset=offset, mode=0o755 if mode & 0o111 else 0o644)


class WholeGroups:
    """The tar layers a commit keeps grouped files of, each fetched whole once into the model
    cache (checked against its digest) and its files read there: a commit that writes a group
    again reads every file it keeps, twice (hashed, then sent), which by ranges would be two
    registry requests a file. A file past :data:`GROUPED_MAX` (not one serve grouped) is read by
    its range instead."""

    def __init__(self, cache: ModelCache, store: ReadableStore):
        self.cache, self.store = cache, store
        self._lock = threading.Lock()

    def opener(self, member: Member) -> Callable[[], BinaryIO]:
        if member.size > GROUPED_MAX or not isinstance(self.store, RangedBlobSource):
            return lambda: self.store.open_blob(member)

        def open_member() -> BinaryIO:
            with open(self._whole(member.within), "rb") as layer:
                data = os.pread(layer.fileno(), member.size, member.offset)
            return verified(io.BytesIO(data), member.digest, member.size, what="grouped file")  # type: ignore[return-value]  # a verifying read()-stream where BinaryIO is named

        return open_member

    def _whole(self, layer: Descriptor) -> Path:
        from ocibridge.cache.locks import flocked
        from ocibridge.oci.digest import split_digest

        blobs = self.cache.blobs
        with self._lock, flocked(self.cache.locks / f"{split_digest(layer.digest)[1]}.lock"):
            if not blobs.exists(layer):
                assert isinstance(self.store, RangedBlobSource)
                blobs.download_blob(layer, self.store)
        return blobs.blob_path(layer.digest)
