"""Checking a layer against its chunk table while it streams in, in order.

The pull engine (``stores.partial``) hashes a blob in order as its parts arrive; given this
hasher instead of the blob digest's, every chunk is compared with its table entry the moment
its last byte is in. So a reader can be handed bytes up to :attr:`TableHasher.verified` long
before the blob ends, each byte hashed once, as a chunk read would have checked it.

What it checks is the table's word, not the blob's digest: a table from an untrusted manifest
can claim any layer digest, so a file checked by it alone is kept under the table's content
key (``LayerChunks.content_key``: lazy reads' ``chunks/layers``, serve's cold reads), never under
the layer digest that readers of other manifests trust.
"""

from __future__ import annotations

import threading

from ocibridge.chunks.chunktable import LayerChunks
from ocibridge.oci.digest import split_digest


class TableHasher:
    """A :class:`ocibridge.oci.digest.Hasher` that checks chunk digests, with the hash the table
    names, instead of one digest.

    ``hexdigest`` answers the layer digest's hex once every chunk matched and the size is
    reached (what the table stands for: the manifest binds both), else an empty string, so
    the download that feeds it refuses the blob as it refuses a wrong digest."""

    def __init__(self, chunks: LayerChunks, chunk_size: int):
        self._chunks = chunks
        self._chunk_size = chunk_size
        self._new = chunks.hasher_factory()  # the table's own hash: a SHA-256 table is checked with SHA-256
        self._current = self._new()
        self._in_chunk = 0  # bytes of the current chunk hashed so far
        self._index = 0  # the chunk being hashed
        self._fed = 0
        self._verified = 0
        self.failed_chunk: int | None = None  # the first chunk that did not match
        self._lock = threading.Lock()

    @property
    def verified(self) -> int:
        """Bytes from the first that matched their chunk digests."""
        with self._lock:
            return self._verified

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        view = memoryview(data).cast("B")
        self._fed += len(view)
        if self.failed_chunk is not None:
            return  # nothing after a wrong chunk is vouched for
        while len(view):
            if self._index * self._chunk_size >= self._chunks.size:
                self.failed_chunk = self._index  # more bytes than the table covers
                return
            want = self._chunk_end() - self._index * self._chunk_size - self._in_chunk
            take = view[:want]
            self._current.update(take)
            self._in_chunk += len(take)
            view = view[len(take):]
            if len(take) == want:
                self._close_chunk()
                if self.failed_chunk is not None:
                    return

    def _chunk_end(self) -> int:
        return min((self._index + 1) * self._chunk_size, self._chunks.size)

    def _close_chunk(self) -> None:
        expected = self._chunks.chunks[self._index] if self._index < len(self._chunks.chunks) else None
        if self._current.hexdigest() != expected:
            self.failed_chunk = self._index
            return
        with self._lock:
            self._verified = self._chunk_end()
        self._index += 1
        self._in_chunk = 0
        self._current = self._new()

    def hexdigest(self) -> str:
        if self.failed_chunk is None and self._fed == self._chunks.size and self.verified == self._chunks.size:
            return split_digest(self._chunks.digest)[1]
        return ""
