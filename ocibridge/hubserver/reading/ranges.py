"""Byte ranges of a file whose blob the model cache lacks, answered from verified chunks when
the model manifest binds a chunk table (docs/lazy.md), instead of fetching the whole blob first.

Only a table the manifest binds is used (``io.ocibridge.chunks.digest``: the manifest digest,
which the revision resolved to, covers it); with none, or no entry for the layer, the caller
fetches the whole blob as before. Each chunk is fetched with an HTTP Range and checked against
its digest in the table before a byte of it is sent; verified chunks are kept in the model
cache (``$OCIBRIDGE_CACHE/chunks``), so a range asked again moves nothing. A range is read a
few chunks at a time (memory does not grow with its length), with no read-ahead past it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import anyio.to_thread

from ocibridge.chunks.chain import bound_table_descriptor, read_table_blob
from ocibridge.chunks.chunktable import ChunkTable, LayerChunks
from ocibridge.errors import OcibridgeError
from ocibridge.lazyread.blobreader import VerifiedBlob
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.ranged import RangedBlobSource

if TYPE_CHECKING:
    from ocibridge.cache.modelcache import ModelCache
    from ocibridge.stores.base import Store

#: bytes read from the chunks per step of a range (a whole number of 1 MiB chunks)
STEP = 8 << 20
#: chunks each open blob keeps in memory
KEPT = 8
#: open blobs kept for ranges to come (each holds at most KEPT chunks)
OPEN = 16


class ChunkRanges:
    """Verified readers of blobs by chunk, shared by the requests for ranges of one blob."""

    def __init__(self, cache: ModelCache):
        from ocibridge.cache.chunks import CacheChunks

        self.chunk_store = CacheChunks(cache.root)
        self._tables: OrderedDict[str, ChunkTable | None] = OrderedDict()  # by table digest
        self._blobs: OrderedDict[tuple[int, str], tuple[VerifiedBlob, list[int]]] = OrderedDict()
        self._lock = threading.Lock()

    def _table(self, store: Store, manifest: Manifest) -> ChunkTable | None:
        bound = bound_table_descriptor(manifest)
        if bound is None:
            return None
        with self._lock:
            if bound.digest in self._tables:
                return self._tables[bound.digest]
        try:
            table: ChunkTable | None = read_table_blob(store, bound)  # checked against its digest
        except OcibridgeError:
            table = None  # not there, or not intact: the whole blob is fetched (and verified) instead
        with self._lock:
            self._tables[bound.digest] = table
            while len(self._tables) > 4 * OPEN:
                self._tables.popitem(last=False)
        return table

    def layer_table(self, store: Store, manifest: Manifest, layer: Descriptor) -> tuple[LayerChunks, int] | None:
        """``layer``'s chunk digests and the chunk size, when the manifest binds a table with an
        entry for it (a registry fetch of the whole blob is then checked chunk by chunk)."""
        if not isinstance(store, RangedBlobSource):
            return None
        table = self._table(store, manifest)
        chunks = table.for_layer(layer) if table is not None else None
        return (chunks, table.chunk_size) if table is not None and chunks is not None else None

    def open(self, store: Store, manifest: Manifest, layer: Descriptor) -> VerifiedBlob | None:
        """A chunk reader of ``layer`` (held: :meth:`release` it), or None when the manifest binds
        no table with an entry for it, or the store sends no parts of blobs."""
        if not isinstance(store, RangedBlobSource):
            return None
        key = (id(store), layer.digest)
        with self._lock:
            held = self._blobs.get(key)
            if held is not None:
                held[1][0] += 1
                self._blobs.move_to_end(key)
                return held[0]
        table = self._table(store, manifest)
        chunks = table.for_layer(layer) if table is not None else None
        if table is None or chunks is None:
            return None
        blob = VerifiedBlob(store, layer, chunks, table.chunk_size,
                            cached=KEPT, store=self.chunk_store, read_ahead=False)
        with self._lock:
            held = self._blobs.setdefault(key, (blob, [0]))
            held[1][0] += 1
        if held[0] is not blob:
            blob.close()
        return held[0]

    def release(self, blob: VerifiedBlob) -> None:
        idle: list[VerifiedBlob] = []
        with self._lock:
            for held, users in self._blobs.values():
                if held is blob:
                    users[0] -= 1
            for key in list(self._blobs):
                if len(self._blobs) <= OPEN:
                    break
                held, users = self._blobs[key]
                if users[0] == 0:
                    del self._blobs[key]
                    idle.append(held)
        for held in idle:
            held.close()

    async def read(self, blob: VerifiedBlob, start: int, end: int) -> AsyncIterator[bytes]:
        """Bytes ``[start, end)`` of ``blob``, verified, a step at a time; the blob is released at the end."""
        try:
            at = start
            while at < end:
                stop = min(end, (at // STEP + 1) * STEP)
                yield await anyio.to_thread.run_sync(blob.read, at, stop)
                at = stop
        finally:
            self.release(blob)

    def close(self) -> None:
        with self._lock:
            blobs, self._blobs = [b for b, _ in self._blobs.values()], OrderedDict()
        for blob in blobs:
            blob.close()
