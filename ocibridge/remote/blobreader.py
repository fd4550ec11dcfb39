"""Byte ranges of one blob, every byte verified before it is returned.

With a chunk table, ``[start, end)`` is served from the chunks that cover it, each fetched with
an HTTP Range and checked against its digest in the table (several at once). Without one, the
whole blob is read once into a spool file, checked against the layer digest, and ranges are
served from there: slower, never unverified.
"""

from __future__ import annotations

import functools
import hashlib
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Protocol

from ocibridge.errors import DigestMismatch, OcibridgeError
from ocibridge.oci.models import Descriptor
from ocibridge.remote.chunkstore import ChunkStore
from ocibridge.remote.table import LayerChunks
from ocibridge.stores.base import ReadableStore
from ocibridge.stores.ranged import RangedBlobSource

#: verified chunks kept in memory per blob (1 MiB each by default)
CACHED_CHUNKS = 96
#: chunk requests in flight for one read
PARALLEL = 8
#: most chunks asked in one Range request: fewer, longer requests for long reads (one request
#: per 1 MiB chunk took 3-4× a pull's time for a whole file), still checked chunk by chunk
SPAN_CHUNKS = 16
#: reads of this many chunks or more that continue the last read start a read-ahead
READ_AHEAD_MIN = 4
#: and read on at most this many chunks (half the cache: what is read ahead stays until used)
READ_AHEAD_MAX = CACHED_CHUNKS // 2
_SPOOL_PIECE = 1024 * 1024


def _spans(indexes: list[int], most: int) -> list[range]:
    """Runs of consecutive indexes, each of at most ``most``."""
    spans: list[range] = []
    for i in indexes:
        last = spans[-1] if spans else None
        if last is not None and last.stop == i and len(last) < most:
            spans[-1] = range(last.start, i + 1)
        else:
            spans.append(range(i, i + 1))
    return spans


class LazySource(ReadableStore, RangedBlobSource, Protocol):
    """A store that can both read a blob whole (verified) and send parts of it (a registry)."""


class RangeOutside(OcibridgeError):
    """A range that does not lie within the file."""


class VerifiedBlob:
    """Reads of one layer blob; thread-safe."""

    def __init__(self, source: LazySource, layer: Descriptor, chunks: LayerChunks | None,
                 chunk_size: int, *, on_fallback: Callable[[], None] | None = None,
                 parallel: int = PARALLEL, cached: int = CACHED_CHUNKS, store: ChunkStore | None = None):
        self.source = source
        self.store = store  # verified chunks kept across opens (the model cache), if any
        self.layer = layer
        self.chunks = chunks
        self.chunk_size = chunk_size
        self._on_fallback = on_fallback
        self._parallel = max(1, parallel)
        self._cached = max(1, cached)
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._lock = threading.RLock()  # a fetch done before its callback is added calls back under it
        self._spool: IO[bytes] | None = None
        self._workers: ThreadPoolExecutor | None = None
        self._pending: dict[int, Future[dict[int, bytes]]] = {}
        self._next = -2  # the chunk after the last read: a read starting there is sequential
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
        have: dict[int, bytes] = {}
        waits: dict[int, Future[dict[int, bytes]]] = {}
        with self._lock:
            for i in wanted:
                if i in self._cache:
                    have[i] = self._cache[i]
                    self._cache.move_to_end(i)
                elif i in self._pending:
                    waits[i] = self._pending[i]
            futures = self._submit([i for i in wanted if i not in have and i not in waits])
            waits.update(futures)
            # a long read that continues the last one: read on as far ahead while the caller works
            # (never for short reads: a tensor after its header must not cost a chunk more)
            sequential = wanted.start in (self._next, self._next - 1) and len(wanted) >= READ_AHEAD_MIN
            self._next = wanted.stop
            if sequential:
                ahead = range(wanted.stop, min(wanted.stop + min(len(wanted), READ_AHEAD_MAX), self._count))
                self._submit([i for i in ahead if i not in self._cache and i not in self._pending])
        for i, future in waits.items():
            have[i] = future.result()[i]
        return [have[i] for i in wanted]

    @property
    def _count(self) -> int:
        return -(-self.size // self.chunk_size)

    def _submit(self, missing: list[int]) -> dict[int, Future[dict[int, bytes]]]:
        """Start getting ``missing`` chunks, in spans: from the chunk store those it holds, the
        rest from the source (called with the lock held)."""
        started: dict[int, Future[dict[int, bytes]]] = {}
        if not missing:
            return started
        if self._workers is None:
            self._workers = ThreadPoolExecutor(self._parallel, thread_name_prefix="chunk")
        stored = self._stored(missing)
        for span in _spans([i for i in missing if i in stored], SPAN_CHUNKS) + \
                _spans([i for i in missing if i not in stored], SPAN_CHUNKS):
            work = self._load_span if span.start in stored else self._fetch_span
            future = self._workers.submit(work, span)
            for i in span:
                started[i] = self._pending[i] = future
            # after the entries exist: a future already done runs this at once, in this thread
            future.add_done_callback(functools.partial(self._done, span))
        return started

    def _stored(self, indexes: list[int]) -> set[int]:
        if self.store is None or self.chunks is None:
            return set()
        return {i for i in indexes if self.store.has(self.chunks.chunks[i])}

    def _done(self, span: range, future: Future[dict[int, bytes]]) -> None:
        with self._lock:
            for i in span:
                if self._pending.get(i) is future:
                    del self._pending[i]
            if future.cancelled() or future.exception() is not None:
                return  # the reader that waits on it raises the error; nothing is cached
            for i, data in future.result().items():
                self._cache[i] = data
                self._cache.move_to_end(i)
            while len(self._cache) > self._cached:
                self._cache.popitem(last=False)

    def _load_span(self, span: range) -> dict[int, bytes]:
        """Chunks from the store, each checked against the table as if it had just arrived;
        one missing or damaged is fetched from the source instead."""
        assert self.chunks is not None and self.store is not None
        out: dict[int, bytes] = {}
        for index in span:
            data = self.store.get(self.chunks.chunks[index])
            if data is None or hashlib.sha256(data).hexdigest() != self.chunks.chunks[index]:
                if data is not None:
                    self.store.drop(self.chunks.chunks[index])
                out.update(self._fetch_span(range(index, index + 1)))
            else:
                out[index] = data
        return out

    def _fetch_span(self, span: range) -> dict[int, bytes]:
        """Consecutive chunks in one Range request, each checked as soon as it has arrived."""
        assert self.chunks is not None
        start = span.start * self.chunk_size
        end = min(span.stop * self.chunk_size, self.size)
        reader = self.source.open_blob_range(self.layer, start, end)
        out: dict[int, bytes] = {}
        try:
            for index in span:
                at = index * self.chunk_size
                want = min(at + self.chunk_size, self.size) - at
                buffer = bytearray(want)
                view = memoryview(buffer)
                got = 0
                while got < want:
                    n = reader.readinto(view[got:])
                    if not n:
                        break
                    got += n
                with self._lock:
                    self.bytes_fetched += got
                if got != want or hashlib.sha256(view[:got]).hexdigest() != self.chunks.chunks[index]:
                    raise DigestMismatch(
                        f"{self.source.describe()}: chunk {index} of {self.layer.digest} (bytes {at}-{at + want}) "
                        "does not match its digest in the chunk table: refusing the range")
                out[index] = data = bytes(buffer)
                if self.store is not None:  # only now: verified
                    self.store.put(self.chunks.chunks[index], data)
        finally:
            reader.close()
        return out

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
            pool, self._workers = self._workers, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            if self._spool is not None:
                self._spool.close()
                self._spool = None
            self._cache.clear()
