"""Delta downloads with what this machine holds (a :class:`stores.ranged.DeltaBuilder`): the
chunks of the model cache's blobs (its index, :mod:`ocibridge.chunks.chunkindex`) and, for a pull into a
directory, the file each layer is about to replace there (the old version of that file).

A layer the chunk table describes is built by :func:`ocibridge.chunks.delta.delta_download`
when any of its chunks is held; each build is said in one line ("reused N of M chunks") and
kept in :attr:`LocalDelta.results`. A delta that fails its checks is said too, and the caller
downloads the blob whole.
"""

from __future__ import annotations

from pathlib import Path

from ocibridge.cache.chunks import CacheChunks
from ocibridge.chunks.chunkindex import ChunkIndex
from ocibridge.chunks.delta import DeltaResult, LocalChunks, delta_download, reuse_line, worth_it
from ocibridge.chunks.localchunks import AnyChunks, FileChunks
from ocibridge.chunks.table import ChunkTable, LayerChunks
from ocibridge.core import notices
from ocibridge.core.fsutil import safe_relpath
from ocibridge.errors import DigestMismatch, UnsafePath
from ocibridge.oci.layerinfo import layer_path
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import Store
from ocibridge.stores.ranged import ByteCount, RangedBlobSource


class LocalDelta:
    """Deltas for the layers of one manifest, whose bound ``table`` is known."""

    def __init__(self, table: ChunkTable, index: ChunkIndex | None, existing: Path | None = None):
        self.table = table
        self._index = index  # the model cache's
        self._existing = existing  # the directory a pull writes into
        self.results: list[DeltaResult] = []

    def build(self, final: Path, desc: Descriptor, source: RangedBlobSource,
              on_bytes: ByteCount | None = None) -> bool:
        entry = self.table.for_layer(desc)
        if entry is None:
            return False
        local = AnyChunks(self._places(desc, entry))
        try:
            if not worth_it(entry, local):
                return False
            try:
                result = delta_download(final, desc, entry, self.table.chunk_size, local, source, on_bytes)
            except DigestMismatch as e:
                notices.say(f"delta download of {desc.digest} failed ({e}): downloading it whole")
                return False
        finally:
            local.close()
        self.results.append(result)
        notices.say(reuse_line(result))
        return True

    def remember(self, desc: Descriptor) -> None:
        """``desc`` is in the model cache now (verified): its chunks are indexed."""
        entry = self.table.for_layer(desc)
        if entry is not None and self._index is not None:
            self._index.remember(entry, self.table.chunk_size)

    def _places(self, desc: Descriptor, entry: LayerChunks) -> list[LocalChunks]:
        places: list[LocalChunks] = []
        if self._index is not None:
            places.append(self._index.for_layer(entry))  # the model cache's blobs
            lazy = CacheChunks(self._index.root)
            places.append(lazy.of_hash(entry.algorithm))  # and its chunks of lazy reads, one per file
            key = entry.content_key(self.table.chunk_size)  # or in a layer file (a whole read: a mount's cp)
            places.append(FileChunks(lazy.layer_path(key), self.table.chunk_size, entry))
        name = layer_path(desc)
        if self._existing is not None and name is not None:
            try:
                path = self._existing / safe_relpath(name, "layer file path")
            except UnsafePath:
                return places
            places.append(FileChunks(path, self.table.chunk_size, entry))
        return places


def pull_delta(store: Store, desc: Descriptor, manifest: Manifest, dest: Path | None) -> LocalDelta | None:
    """Deltas for a pull of ``manifest`` (a model manifest, in hand, at ``desc``) into ``dest``
    (a directory; None: an archive), from the model cache's blobs and the files ``dest`` holds;
    None without a bound chunk table."""
    from ocibridge.cache.records import model_cache_root
    from ocibridge.chunks.bound import table_bound_by

    if not isinstance(store, RangedBlobSource):
        return None  # no Range requests: nothing to fetch a part of
    table = table_bound_by(store, desc, manifest)
    if table is None:
        return None
    root = model_cache_root()
    return LocalDelta(table, ChunkIndex(root) if root.is_dir() else None, dest)
