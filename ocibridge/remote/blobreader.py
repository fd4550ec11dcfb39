"""Byte ranges of one blob, every byte verified before it is returned.

With a chunk table, ``[start, end)`` is served from the chunks that cover it, each fetched with
an HTTP Range and checked against its digest in the table (several at once). Without one, the
whole blob is read once into a spool file, checked against the layer digest, and ranges are
served from there: slower, never unverified.
"""

from __future__ import annotations

import hashlib
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Protocol

from ocibridge.errors import DigestMismatch, OcibridgeError
from ocibridge.oci.models import Descriptor
from ocibridge.remote.table import LayerChunks
from ocibridge.stores.base import ReadableStore
from ocibridge.stores.ranged import RangedBlobSource

#: verified chunks kept in memory per blob (1 MiB each by default)
CACHED_CHUNKS = 64
#: chunk requests in flight for one read
PARALLEL = 8
_SPOOL_PIECE = 1024 * 1024


class LazySource(ReadableStore, RangedBlobSource, Protocol):
    """A store that can both read a blob whole (verified) and send parts of it (a registry)."""


class RangeOutside(OcibridgeError):
    """A range that does not lie within the file."""


class VerifiedBlob:
    """Reads of one layer blob; thread-safe."""

    def __init__(self, source: LazySource, layer: Descriptor, chunks: LayerChunks | None,
                 chunk_size: int, *, on_fallback: Callable[[], None] | None = None,
                 parallel: int = PARALLEL, cached: int = CACHED_CHUNKS):
        self.source = source
        self.layer = layer
        self.chunks = chunks
        self.chunk_size = chunk_size
        self._on_fallback = on_fallback
        self._parallel = max(1, parallel)
        self._cached = max(1, cached)
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._spool: IO[bytes] | None = None
        #: bytes of this blob received from the source (chunks or the whole blob)
        self.bytes_fetched = 0

    @property
    def size(self) -> int:
        return self.layer.size

    @property
    def lazy(self) -> bool:
        """Whether ranges are read chunk by chunk (else the blob is read whole, once)."""
        return self.chunks is not None

    def read(self, start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` (``end`` None or past the end: to the end), all verified."""
        end = self.size if end is None else min(end, self.size)
        if start < 0 or start > end:
            raise RangeOutside(f"{self.layer.digest}: range {start}-{end} is outside 0-{self.size}")
        if start == end:
            return b""
        if self.chunks is None:
            return self._from_spool(start, end)
        first, last = start // self.chunk_size, (end - 1) // self.chunk_size
        pieces = self._chunks(range(first, last + 1))
        data = b"".join(pieces)
        offset = first * self.chunk_size
        return data[start - offset : end - offset]

    # -- chunks ----------------------------------------------------------------------------
    def _chunks(self, wanted: range) -> list[bytes]:
        with self._lock:
            have = {i: self._cache[i] for i in wanted if i in self._cache}
            for i in have:
                self._cache.move_to_end(i)
        missing = [i for i in wanted if i not in have]
        if len(missing) == 1:
            have[missing[0]] = self._fetch(missing[0])
        elif missing:
            with ThreadPoolExecutor(min(self._parallel, len(missing)), thread_name_prefix="chunk") as pool:
                for i, data in zip(missing, pool.map(self._fetch, missing), strict=True):
                    have[i] = data
        with self._lock:
            for i in missing[-self._cached:]:
                self._cache[i] = have[i]
                self._cache.move_to_end(i)
            while len(self._cache) > self._cached:
                self._cache.popitem(last=False)
        return [have[i] for i in wanted]

    def _fetch(self, index: int) -> bytes:
        assert self.chunks is not None
        start = index * self.chunk_size
        end = min(start + self.chunk_size, self.size)
        reader = self.source.open_blob_range(self.layer, start, end)
        parts: list[bytes] = []
        got = 0
        try:
            buffer = bytearray(end - start)
            view = memoryview(buffer)
            while got < end - start:
                n = reader.readinto(view[got:])
                if not n:
                    break
                got += n
            parts.append(bytes(view[:got]))
        finally:
            reader.close()
        with self._lock:
            self.bytes_fetched += got
        data = b"".join(parts)
        if got != end - start or hashlib.sha256(data).hexdigest() != self.chunks.chunks[index]:
            raise DigestMismatch(
                f"{self.source.describe()}: chunk {index} of {self.layer.digest} (bytes {start}-{end}) "
                "does not match its digest in the chunk table: refusing the range")
        return data

    # -- the whole blob, once --------------------------------------------------------------
    def _from_spool(self, start: int, end: int) -> bytes:
        with self._lock:
            if self._spool is None:
                if self._on_fallback is not None:
                    self._on_fallback()
                self._spool = self._download()
            self._spool.seek(start)
            return self._spool.read(end - start)

    def _download(self) -> IO[bytes]:
        spool = tempfile.TemporaryFile(prefix="ocibridge-lazy-")  # noqa: SIM115  # kept open: the reads serve from it
        try:
            with self.source.open_blob(self.layer) as reader:  # verifies digest and size at its end
                while True:
                    piece = reader.read(_SPOOL_PIECE)
                    if not piece:
                        break
                    spool.write(piece)
                    self.bytes_fetched += len(piece)
        except BaseException:
            spool.close()
            raise
        return spool

    def close(self) -> None:
        with self._lock:
            if self._spool is not None:
                self._spool.close()
                self._spool = None
            self._cache.clear()
