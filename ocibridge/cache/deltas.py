"""Delta downloads with what this machine holds (a :class:`stores.ranged.DeltaBuilder`): the
chunks of the model cache's blobs (its index, :mod:`ocibridge.chunks.chunkindex`) and, for a pull into a
directory, the file each layer is about to replace there (the old version of that file).

A layer the chunk table describes is built by :func:`ocibridge.chunks.delta.delta_download`
when any of its chunks is held; each build is said in one line ("reused N of M chunks") and
kept in :attr:`LocalDelta.results`. A delta that fails its checks is said too, and the caller
downloads the blob whole.
"""

from __future__ import annotations

import logging
import stat
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ocibridge.core import notices
from ocibridge.core.fsutil import safe_relpath
from ocibridge.errors import ChunkTableError, DigestMismatch, UnsafePath
from ocibridge.oci.layerinfo import layer_path
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.ranged import ByteCount, RangedStore

if TYPE_CHECKING:  # the chunk modules load when a delta may be built: something here to diff against
    from ocibridge.chunks.chunkindex import ChunkIndex
    from ocibridge.chunks.chunktable import ChunkTable, LayerChunks
    from ocibridge.chunks.delta import DeltaResult, LocalChunks
    from ocibridge.chunks.tabledfetch import TableCheckedLayer


#: ``chunks.table.ANNOTATION_DIGEST`` (tests/transfer/test_delta_pulls.py holds them equal), here so that a
#: pull of a manifest that names no table loads no chunk module to learn it
_TABLE_ANNOTATION = "io.ocibridge.chunks.digest"


class TableOnFirstUse:
    """The chunk table a model manifest binds (its annotations name it), read from the source
    the first layer is fetched from, once whatever the threads: a pull that fetches no layer
    (its files all in DEST already) reads none, and the pull hands its store to no one but its
    cache. None where the manifest binds none, or it cannot be had (plain downloads then)."""

    def __init__(self, desc: Descriptor, manifest: Manifest):
        self._desc, self._manifest = desc, manifest
        self._lock = threading.Lock()
        self._read: tuple[ChunkTable | None] | None = None  # (the table, or None: none to be had)

    @property
    def binds_one(self) -> bool:
        """Whether the manifest names a table at all (asked without loading a chunk module)."""
        return _TABLE_ANNOTATION in (self._manifest.annotations or {})

    def read(self, source: RangedStore) -> ChunkTable | None:
        with self._lock:
            if self._read is None:
                self._read = (self._table_from(source),)
            return self._read[0]

    def _table_from(self, source: RangedStore) -> ChunkTable | None:
        from ocibridge.chunks.bound import table_at
        from ocibridge.chunks.chain import bound_table_descriptor

        try:
            table = bound_table_descriptor(self._manifest)
        except ChunkTableError as e:  # a table is never needed: plain downloads, each verified
            logging.getLogger("ocibridge").debug("chunk table of %s not used: %s", self._desc.digest, e)
            return None
        return None if table is None else table_at(source, self._desc, table)


class LocalDelta:
    """Deltas for the layers of one manifest: its bound ``table`` known (the model cache), or
    read when the first layer is built (:class:`TableOnFirstUse`, a pull)."""

    def __init__(self, table: ChunkTable | TableOnFirstUse, index: ChunkIndex | None,
                 existing: Path | None = None, table_checks: bool = False):
        self._table = table
        self._table_checks = table_checks  # a layer may be checked by the table (checked_by_table)
        self._index = index  # the model cache's
        self._existing = existing  # the directory a pull writes into
        self.results: list[DeltaResult] = []

    @property
    def table(self) -> ChunkTable | None:
        """The table, when known (a pull's before its first layer is built: None)."""
        return None if isinstance(self._table, TableOnFirstUse) else self._table

    def build(self, final: Path, desc: Descriptor, source: RangedStore,
              on_bytes: ByteCount | None = None) -> bool:
        if self._index is None and self._existing_file(desc) is None:
            return False  # nothing here holds a chunk: no table read (a request and a parse before the first byte)
        from ocibridge.chunks.delta import delta_download, reuse_line, worth_it
        from ocibridge.chunks.localchunks import AnyChunks

        table = self._table.read(source) if isinstance(self._table, TableOnFirstUse) else self._table
        entry = None if table is None else table.for_layer(desc)
        if table is None or entry is None:
            return False
        local = AnyChunks(self._places(desc, entry, table.chunk_size))
        try:
            if not worth_it(entry, local):
                return False
            try:
                result = delta_download(final, desc, entry, table.chunk_size, local, source, on_bytes)
            except DigestMismatch as e:
                notices.say(f"delta download of {desc.digest} failed ({e}): downloading it whole")
                return False
        finally:
            local.close()
        self.results.append(result)
        notices.say(reuse_line(result))
        return True

    def checked_by_table(self, desc: Descriptor, source: RangedStore) -> TableCheckedLayer | None:
        """(a :class:`ocibridge.transfer.tabledpull.LayerTables`) ``desc`` as the bound table
        covers it (its entry and the chunk size), read once per pull and only when a layer is fetched;
        None without a table, one that leaves ``desc`` out, or a SHA-256 table."""
        if not self._table_checks:
            return None  # a signature vouched for the files' digests, not for the table
        if isinstance(self._table, TableOnFirstUse) and not self._table.binds_one:
            return None  # no table named: no chunk module loaded (a small model's pull)
        from ocibridge.chunks.hashes import SHA256
        from ocibridge.chunks.tabledfetch import TableCheckedLayer

        table = self._table.read(source) if isinstance(self._table, TableOnFirstUse) else self._table
        entry = None if table is None else table.for_layer(desc)
        if table is None or entry is None or entry.algorithm == SHA256:
            return None
        return TableCheckedLayer(desc, entry, table.chunk_size)

    def remember(self, desc: Descriptor) -> None:
        """``desc`` is in the model cache now (verified): its chunks are indexed."""
        table = self.table
        entry = None if table is None else table.for_layer(desc)
        if table is not None and entry is not None and self._index is not None:
            self._index.remember(entry, table.chunk_size)

    def remember_kept(self, desc: Descriptor) -> None:
        """``desc``'s table-keyed layer file is linked into a snapshot (hashed whole): its
        chunks are indexed there, as a blob's would be."""
        table = self.table
        entry = None if table is None else table.for_layer(desc)
        if table is not None and entry is not None and self._index is not None:
            self._index.remember_layer(entry, table.chunk_size)

    def _existing_file(self, desc: Descriptor) -> Path | None:
        """The regular file a pull into a directory is about to replace with ``desc`` (the old
        version of the same file: :class:`FileChunks` reads no other kind), or None."""
        name = layer_path(desc)
        if self._existing is None or name is None:
            return None
        try:
            path = self._existing / safe_relpath(name, "layer file path")
            return path if stat.S_ISREG(path.lstat().st_mode) else None
        except (UnsafePath, OSError):
            return None

    def _places(self, desc: Descriptor, entry: LayerChunks, chunk_size: int) -> list[LocalChunks]:
        from ocibridge.cache.chunks import CacheChunks
        from ocibridge.chunks.localchunks import FileChunks

        places: list[LocalChunks] = []
        if self._index is not None:
            places.append(self._index.for_layer(entry))  # the model cache's blobs
            lazy = CacheChunks(self._index.root)
            places.append(lazy.of_hash(entry.algorithm))  # and its chunks of lazy reads, one per file
            key = entry.content_key(chunk_size)  # or in a layer file (a whole read: a mount's cp)
            places.append(FileChunks(lazy.layer_path(key), chunk_size, entry))
        existing = self._existing_file(desc)  # the old version of the file, in DEST
        if existing is not None:
            places.append(FileChunks(existing, chunk_size, entry))
        return places


def pull_delta(desc: Descriptor, manifest: Manifest, dest: Path | None, *, table_checks: bool = False) -> LocalDelta:
    """Deltas for a pull of ``manifest`` (a model manifest, in hand, at ``desc``) into ``dest``
    (a directory; None: an archive), from the model cache's blobs and the files ``dest`` holds;
    ``table_checks``: a layer the table covers may be checked by it instead of its digest.
    The chunk table the manifest binds is read from the store the pull's cache hands the first
    :meth:`LocalDelta.build` (:class:`TableOnFirstUse`; a store that sends no ranges asks none)."""
    from ocibridge.cache.records import model_cache_root

    root = model_cache_root()
    if not root.is_dir():  # no model cache: no index to read (nor its module to load)
        return LocalDelta(TableOnFirstUse(desc, manifest), None, dest, table_checks)
    from ocibridge.chunks.chunkindex import ChunkIndex

    return LocalDelta(TableOnFirstUse(desc, manifest), ChunkIndex(root), dest, table_checks)
