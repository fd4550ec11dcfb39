"""Byte ranges of one blob, every byte verified before it is returned.

With a chunk table, ``[start, end)`` is served from the chunks that cover it, each fetched with
an HTTP Range and checked against its digest in the table (several at once). Without one, the
whole blob is read once into a spool file, checked against the layer digest, and ranges are
served from there: slower, never unverified.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ocibridge.chunks.chunktable import LayerChunks
from ocibridge.errors import DigestMismatch, OcibridgeError
from ocibridge.lazyread.budget import ReadBudget
from ocibridge.lazyread.chunkstore import ChunkStore, StoredLayer
from ocibridge.lazyread.keeper import Chunk, ChunkKeeper
from ocibridge.lazyread.landcheck import ChunkDigests, Mismatch
from ocibridge.lazyread.layerfill import FILL_AFTER, FILL_MIN_SIZE, FillFailed, LayerFill
from ocibridge.lazyread.rangefetch import EndedEarly, fetch_checked
from ocibridge.lazyread.rangeless import LazySource, WholeWhenRangeless
from ocibridge.lazyread.stall import StallBound
from ocibridge.lazyread.wholeblob import download_whole, stored_whole
from ocibridge.oci.models import Descriptor

#: verified chunks kept in memory per blob (1 MiB each by default)
CACHED_CHUNKS = 96
#: chunk requests in flight for one blob
PARALLEL = 8
#: most chunks asked in one Range request: fewer, longer requests for long reads (one request
#: per 1 MiB chunk took 3-4× a pull's time for a whole file), still checked chunk by chunk
#: (spans of 8 with a read-ahead of 64 took ~2× the CPU time of these at 1 GiB)
SPAN_CHUNKS = 16
#: reads of this many chunks or more that continue the last read start a read-ahead
READ_AHEAD_MIN = 4
#: of four times the read, up to this many chunks (half the cache: what is read ahead stays
#: until used)
READ_AHEAD_MAX = CACHED_CHUNKS // 2
#: how far from the furthest byte read so far a read may start and still continue a sequential
#: run: the kernel sends a reader's read-ahead as several requests at once, and the FUSE loop's
#: threads hand them over in any order (measured: a ``cat`` of a mounted GiB arrived out of
#: order in 2 of 3 runs, which broke the strict run and left the whole read to chunk fetches)
RUN_SLACK = 8 * 1024 * 1024
#: how far past the furthest chunk read a read may start and still continue the run from chunk
#: 0 that the chunk store keeps as one layer file (and so leaves the fill to start): the
#: mount's read-ahead hands a sequential read over as requests of one 1 MiB chunk each, a few
#: at once, in any order (``lazymount.readahead``; measured: chunk 1 opening the run, or chunk
#: 3 before chunk 2, and 3 of 4 cold cats of a mounted GiB never started the fill); a seek
#: further on ends the run
RUN_AHEAD = 4 * 1024 * 1024
T = TypeVar("T")


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


class RangeOutside(OcibridgeError):
    """A range that does not lie within the file."""


class VerifiedBlob:
    """Reads of one layer blob; thread-safe.

    With a chunk store and a table, verified chunks are kept there and read back from there
    (``lazyread.keeper``); with a store and no table, a blob it holds whole is used if it hashes
    to the layer digest."""

    def __init__(self, source: LazySource, layer: Descriptor, chunks: LayerChunks | None,
                 chunk_size: int, *, on_fallback: Callable[[], None] | None = None,
                 parallel: int = PARALLEL, cached: int = CACHED_CHUNKS, store: ChunkStore | None = None,
                 read_ahead: bool = True, budget: ReadBudget | None = None, stall: StallBound | None = None):
        self.source = source
        #: where chunk ranges are asked: from the blob read whole once where the registry
        #: ignores ranges (``lazyread.rangeless``)
        self._ranges = WholeWhenRangeless(source, budget)
        self.stall = stall or StallBound()  # how long a read waits on a silent fetch (lazyread.stall)
        self.budget = budget  # every fetch reserves its bytes here first (None: no cap)
        self._reads_ahead = read_ahead  # off for a reader that knows where its reads end (serve's ranges)
        self.store = store  # verified chunks kept across opens (the model cache), if any
        self.layer = layer
        self.chunks = chunks
        self.chunk_size = chunk_size
        self._on_fallback = on_fallback
        self._parallel = max(1, parallel)
        self._cached = max(1, cached)
        self._cache: OrderedDict[int, Chunk] = OrderedDict()
        self._lock = threading.RLock()  # a fetch done before its callback is added calls back under it
        self._spool: Future[StoredLayer] | None = None  # the whole blob, verified by its digest (no table)
        self._workers: ThreadPoolExecutor | None = None
        self._keeper = ChunkKeeper(store, layer, chunks, chunk_size) if store is not None and chunks else None
        self._pending: dict[int, Future[dict[int, Chunk]]] = {}
        self._asked: dict[Future[Any], float] = {}  # when each pending fetch was started
        self._next = -2  # the chunk after the last read: a read starting there is sequential
        self._run = 0  # chunks read by the current run of sequential reads
        self._ahead_to = 0  # read-ahead has been asked up to this chunk
        #: a run of reads from byte 0 (each within RUN_SLACK of the furthest byte before it): its
        #: furthest byte (-1: broken) and the bytes it read
        self._zero_run = (0, 0)
        self._fill: LayerFill | None = None  # a whole read's one fetch, once started
        self._no_fill = False  # a fill was considered and not started (the cache holds chunks)
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
        start, end = self._within(start, end)
        if start == end:
            return b""
        if self.chunks is None:
            return self._from_spool(start, end)
        fill = self._fill_for(start, end)
        if fill is not None:
            try:
                return fill.read(start, end, self.stall)
            except FillFailed:
                self._fill_stopped()
        first, last = start // self.chunk_size, (end - 1) // self.chunk_size
        pieces = self._chunks(range(first, last + 1))
        lo, hi = start - first * self.chunk_size, end - last * self.chunk_size
        if len(pieces) == 1 and lo == 0 and hi == len(pieces[0]) and isinstance(pieces[0], bytes):
            return pieces[0]
        return b"".join(self._cut(pieces, lo, hi))  # the one copy of the bytes a read returns

    def read_into(self, start: int, end: int, into: memoryview) -> None:
        """:meth:`read`'s bytes written into ``into`` (``end - start`` long, ``end`` within the
        blob) instead of returned: a mount's reply buffer, without a Python object between."""
        start, end = self._within(start, end)
        if len(into) != end - start:
            raise RangeOutside(f"{self.layer.digest}: {len(into)} bytes asked for range {start}-{end}")
        if start == end:
            return
        if self.chunks is None:
            into[:] = self._from_spool(start, end)
            return
        fill = self._fill_for(start, end)
        if fill is not None:
            try:
                fill.read_into(start, end, into, self.stall)
                return
            except FillFailed:
                self._fill_stopped()
        first, last = start // self.chunk_size, (end - 1) // self.chunk_size
        pieces = self._chunks(range(first, last + 1))
        at = 0
        for view in self._cut(pieces, start - first * self.chunk_size, end - last * self.chunk_size):
            into[at:at + len(view)] = view
            at += len(view)

    def stable_fd(self, start: int, end: int) -> int | None:
        """A descriptor whose bytes ``[start, end)`` are verified and stay so while this reader
        is open, once they are (the whole read's fill: ``LayerFill.stable``); None: no such file,
        read them (:meth:`read_into`). Raises as :meth:`read`."""
        start, end = self._within(start, end)
        with self._lock:
            fill = self._fill
        if fill is None or fill.failed or start == end:
            return None
        try:
            return fill.stable(end, self.stall)
        except FillFailed:
            self._fill_stopped()
            return None

    def _within(self, start: int, end: int | None) -> tuple[int, int]:
        end = self.size if end is None else min(end, self.size)
        if start < 0 or start > end:
            raise RangeOutside(f"{self.layer.digest}: range {start}-{end} is outside 0-{self.size}")
        return start, end

    @staticmethod
    def _cut(pieces: list[Chunk], lo: int, hi: int) -> list[memoryview]:
        """The chunks as views, the first from ``lo``, the last up to ``hi``."""
        views = [memoryview(p) for p in pieces]
        views[-1] = views[-1][:hi]  # (first, so that a single piece is cut at both ends right)
        views[0] = views[0][lo:]
        return views

    def _fill_stopped(self) -> None:
        """(not a wrong byte: that raises DigestMismatch) the chunk reads take over, and see
        what the store holds now (another process may have filled the layer file)."""
        if self._keeper is not None:
            self._keeper.look_again()

    # -- a whole read, from one fetch ------------------------------------------------------
    def _fill_for(self, start: int, end: int) -> LayerFill | None:
        """The fill to answer ``[start, end)`` from, started here when this read makes a run
        from byte 0 (each read within RUN_SLACK of the furthest byte before it: in any order)
        that reaches FILL_AFTER, half of what it reaches read (``lazyread.layerfill``); None: read
        by chunks."""
        with self._lock:
            far, read = self._zero_run
            far, read = (max(far, end), read + end - start) if far >= 0 and start <= far + RUN_SLACK else (-1, 0)
            self._zero_run = (far, read)
            if self._fill is not None:
                return None if self._fill.failed else self._fill
            # (half the bytes it reaches read: a reader that skips ahead by RUN_SLACK, a tensor
            # here and there, is no whole read)
            if (far < FILL_AFTER or 2 * read < far or self.size < FILL_MIN_SIZE or not self._reads_ahead
                    or self._keeper is None or self.store is None or self.chunks is None or self._no_fill
                    or self._ranges.whole_only(self.layer)):
                return None
            self._no_fill = True  # decided once: asked again, the answer would cost the same look
            if self._keeper.holds_any():
                return None  # chunk by chunk, each held one read back (a delta read)
            target = self.store.layer_target(self._keeper.key)
            if target is None:
                return None
            self._fill = LayerFill(self.source, self.layer, self.chunks, self.chunk_size, target,
                                   on_bytes=self._count_fetched, where=self.source.describe()).start()
            return self._fill

    def _count_fetched(self, n: int) -> None:
        with self._lock:
            self.bytes_fetched += n

    # -- chunks ----------------------------------------------------------------------------
    def _chunks(self, wanted: range) -> list[Chunk]:
        have: dict[int, Chunk] = {}
        waits: dict[int, Future[dict[int, Chunk]]] = {}
        with self._lock:
            for i in wanted:
                if i in self._cache:
                    have[i] = self._cache[i]
                    self._cache.move_to_end(i)
                elif i in self._pending:
                    waits[i] = self._pending[i]
            futures = self._submit([i for i in wanted if i not in have and i not in waits])
            waits.update(futures)
            self._read_ahead(wanted)
        for i, future in waits.items():
            have[i] = self._wait(future)[i]
        return [have[i] for i in wanted]

    def _wait(self, future: Future[T]) -> T:
        """What ``future`` brings, waited for within the stall bound (from when it was asked)."""
        with self._lock:
            asked = self._asked.get(future, time.monotonic())
        digest = self.layer.digest
        return self.stall.wait(future, lambda: self.stall.since(digest, asked), self.source.describe())

    def _read_ahead(self, wanted: range) -> None:
        """Reads that continue the last one, READ_AHEAD_MIN chunks or more in a row after it (a
        long one, or many short ones): keep up to four times the read (at least two spans, at most
        READ_AHEAD_MAX chunks) fetched ahead while the caller works, topped up in runs of at
        least half that, so that small sequential reads still make long Range requests. Never
        for a first short read: a tensor after its header must not cost a chunk more. Called
        with the lock held."""
        # (requests handed over out of order: an earlier one late, within RUN_SLACK, or one that
        # overtook the chunk before it; a seek further on is a new run)
        late = max(1, RUN_SLACK // self.chunk_size)
        continues = self._next >= 0 and self._next - late <= wanted.start <= self._next + 1
        if continues:
            self._run += max(0, wanted.stop - self._next)
        else:
            self._run = 0  # a first read, however long, reads nothing more
        if self._keeper is not None:
            # the run from chunk 0 for the keeper: an opening read within RUN_AHEAD of byte 0,
            # then reads from RUN_SLACK before the furthest one to RUN_AHEAD past it
            ahead = max(1, RUN_AHEAD // self.chunk_size)
            self._keeper.note_read(wanted.start < ahead if self._next == -2
                                   else self._next - late <= wanted.start <= self._next + ahead)
        self._next = max(self._next, wanted.stop) if continues else wanted.stop
        if self._run < READ_AHEAD_MIN or not self._reads_ahead:
            return
        depth = min(READ_AHEAD_MAX, max(2 * SPAN_CHUNKS, 4 * len(wanted)))
        if self._ahead_to >= min(wanted.stop + depth // 2, self._count):
            return
        start, stop = max(self._ahead_to, wanted.stop), min(wanted.stop + depth, self._count)
        self._ahead_to = stop
        self._submit([i for i in range(start, stop) if i not in self._cache and i not in self._pending])

    @property
    def _count(self) -> int:
        return -(-self.size // self.chunk_size)

    def _submit(self, missing: list[int]) -> dict[int, Future[dict[int, Chunk]]]:
        """Start getting ``missing`` chunks, in spans: from the chunk store those it holds, the
        rest from the source (called with the lock held)."""
        started: dict[int, Future[dict[int, Chunk]]] = {}
        if not missing:
            return started
        self._worker_pool()
        stored = self._stored(missing)
        for span in _spans([i for i in missing if i in stored], SPAN_CHUNKS) + \
                _spans([i for i in missing if i not in stored], SPAN_CHUNKS):
            work = self._load_span if span.start in stored else self._fetch_span
            future = self._worker_pool().submit(work, span)
            self._asked[future] = time.monotonic()
            for i in span:
                started[i] = self._pending[i] = future
            # after the entries exist: a future already done runs this at once, in this thread
            future.add_done_callback(functools.partial(self._done, span))
        return started

    def _worker_pool(self) -> ThreadPoolExecutor:
        """The workers of this blob's fetches (called with the lock held)."""
        if self._workers is None:
            self._workers = ThreadPoolExecutor(self._parallel, thread_name_prefix="chunk")
        return self._workers

    def _stored(self, indexes: list[int]) -> set[int]:
        if self._keeper is None:
            return set()
        return {i for i in indexes if self._keeper.has(i)}

    def _done(self, span: range, future: Future[dict[int, Chunk]]) -> None:
        with self._lock:
            self._asked.pop(future, None)
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

    def _load_span(self, span: range) -> dict[int, Chunk]:
        """Chunks from the store, each checked against the table as if it had just arrived;
        one missing or damaged is fetched from the source instead."""
        assert self._keeper is not None
        out: dict[int, Chunk] = {}
        for index in span:
            data = self._keeper.load(index)
            if data is None:
                out.update(self._fetch_span(range(index, index + 1)))
            else:
                out[index] = data
        return out

    def _fetch_span(self, span: range) -> dict[int, Chunk]:
        """Consecutive chunks in one Range request, each checked as soon as it has arrived
        (``lazyread.rangefetch``), and kept once verified."""
        assert self.chunks is not None
        start = span.start * self.chunk_size
        end = min(span.stop * self.chunk_size, self.size)
        out: dict[int, Chunk] = {}

        def chunk_of(at: int, stop: int) -> list[memoryview]:
            out[at // self.chunk_size] = buffer = bytearray(stop - at)
            return [memoryview(buffer)]

        def keep(at: int) -> None:
            if self._keeper is not None:  # only now: verified
                index = at // self.chunk_size
                self._keeper.keep(index, out[index], fetched=True)

        try:
            fetch_checked(self._ranges, self.layer, start, end, ChunkDigests(self.chunks, self.chunk_size),
                          chunk_of, counted=self._count_fetched, where=self.source.describe(),
                          budget=self.budget, landed=keep)
        except (Mismatch, EndedEarly) as e:  # (a short chunk is a wrong one: refused alike)
            raise DigestMismatch(
                f"{self.source.describe()}: chunk {e.start // self.chunk_size} of {self.layer.digest} (bytes "
                f"{e.start}-{e.end}) does not match its digest in the chunk table: refusing the range") from None
        return out

    # -- the whole blob, once --------------------------------------------------------------
    def _from_spool(self, start: int, end: int) -> bytes:
        """From the whole blob, fetched once (with a stall bound on a worker, waited for within
        it); a fetch that fails leaves the next read to fetch it again."""
        with self._lock:
            if self._spool is None:
                if self._on_fallback is not None:
                    self._on_fallback()
                if self.stall.seconds is None:  # in this thread: nothing to give up on
                    whole: Future[StoredLayer] = Future()
                    whole.set_result(self._whole())
                    self._spool = whole
                else:
                    self._spool = self._worker_pool().submit(self._whole)
                    self._asked[self._spool] = time.monotonic()
                    self._spool.add_done_callback(self._spool_done)
            future = self._spool
        data = self._wait(future).read_at(start, end - start)
        if data is None:
            raise OcibridgeError(f"{self.layer.digest}: the verified copy of the blob could not be read")
        return data

    def _whole(self) -> StoredLayer:
        return self._stored_whole() or self._download()

    def _spool_done(self, future: Future[StoredLayer]) -> None:
        with self._lock:
            self._asked.pop(future, None)
            if self._spool is future and (future.cancelled() or future.exception() is not None):
                self._spool = None  # the next read fetches it again

    def _stored_whole(self) -> StoredLayer | None:
        if self.store is None:
            return None
        return stored_whole(self.store, self.layer, functools.partial(self.stall.heard, self.layer.digest))

    def _download(self) -> StoredLayer:
        return download_whole(self.source, self.layer, self.budget, self._landed_whole)

    def _landed_whole(self, n: int) -> None:
        self.stall.heard(self.layer.digest)  # (a copy going on is no stall)
        self.bytes_fetched += n

    def close(self) -> None:
        with self._lock:
            pool, self._workers = self._workers, None
            fill, self._fill = self._fill, None
        if fill is not None:
            fill.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if self._keeper is not None:  # every verified chunk fetched is in the store when close returns
            self._keeper.close()
        with self._lock:
            spool, self._spool = self._spool, None
            self._cache.clear()
        if spool is not None and spool.done() and not spool.cancelled() and spool.exception() is None:
            spool.result().close()
        self._ranges.close()

