"""How the bytes of one file are checked as they land in memory, in any order.

With a chunk table, each chunk is hashed as soon as it has landed and compared with its table
digest, so a wrong chunk is caught where it lies (and the tensors it holds can be named).
Without one, only the whole file has a digest: the landed ranges are hashed in file order as
the contiguous prefix grows, by whichever receiving thread extends it, and the file is good
only once its last byte matched the layer digest.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Protocol

from ocibridge.chunks.chunktable import LayerChunks


class Mismatch(Exception):
    """Bytes ``[start, end)`` of the file are not the bytes the table (or the layer digest,
    for the whole file) names; the loader turns it into an error naming the tensors."""

    def __init__(self, start: int, end: int, what: str):
        super().__init__(what)
        self.start = start
        self.end = end
        self.what = what


class LandCheck(Protocol):
    """Checks one file's bytes as they land."""

    #: the size of the pieces it is handed (each a chunk, or the last, shorter one)
    unit: int

    def landed(self, start: int, views: list[memoryview]) -> bool:
        """``views``, in order, are the file's bytes from ``start`` (one unit): raise
        :class:`Mismatch` for wrong bytes; True once the whole file is verified (by this call)."""
        ...


class ChunkDigests:
    """Each chunk against its digest in the chunk table, as it lands (any thread)."""

    def __init__(self, chunks: LayerChunks, chunk_size: int):
        self.chunks = chunks
        self.unit = chunk_size
        self._new_hasher = chunks.hasher_factory()  # the table's own hash (looked up once, not per chunk)

    def landed(self, start: int, views: list[memoryview]) -> bool:
        index = start // self.unit
        digest = self._new_hasher()
        size = 0
        for view in views:
            digest.update(view)  # (hashlib and blake3 let go of the GIL: receiving threads hash in parallel)
            size += len(view)
        if start % self.unit or digest.hexdigest() != self.chunks.chunks[index]:
            raise Mismatch(start, start + size, f"chunk {index} (bytes {start}-{start + size}) of {self.chunks.digest} "
                                                "does not match its digest in the chunk table")
        return False


class WholeDigest:
    """The file's SHA-256 over its bytes in order, against the layer digest: ranges that land
    ahead of the hashed prefix wait (as views of the memory they landed in) until it reaches them."""

    def __init__(self, digest: str, size: int, unit: int):
        self.digest = digest
        self.size = size
        self.unit = unit
        self._hash = hashlib.sha256()
        self._hashed = 0
        self._ready: dict[int, list[memoryview]] = {}
        self._lock = threading.Lock()  # guards _ready
        self._hashing = threading.Lock()  # held by the one thread hashing at a time
        self._finished = False

    def landed(self, start: int, views: list[memoryview]) -> bool:
        with self._lock:
            self._ready[start] = views
        verified = False
        while self._hashing.acquire(blocking=False):
            try:
                verified = self._drain() or verified
            finally:
                self._hashing.release()
            with self._lock:
                if self._hashed not in self._ready:
                    break  # else: landed while this thread let go of the hashing: go on
        return verified

    def _drain(self) -> bool:
        while True:
            with self._lock:
                views = self._ready.pop(self._hashed, None)
            if views is None:
                break
            for view in views:
                self._hash.update(view)
                self._hashed += len(view)
        if self._hashed < self.size or self._finished:
            return False
        self._finished = True
        if "sha256:" + self._hash.hexdigest() != self.digest:
            raise Mismatch(0, self.size, f"its {self.size} bytes do not match its layer digest {self.digest} "
                                         "(no chunk table: the file is checked whole, so no one tensor can be named)")
        return True
