"""Every tensor of a model's tensor files (safetensors, GGUF: ``lazyread.formats``), from the
registry straight into memory, verified.

Each file's header is read first (its first chunk, or more for a long header); then the rest of
the file in long Range requests (``span`` bytes, whole chunks), several in flight, each received
straight into the memory of the tensors it covers (``lazyread.landing``) and checked chunk by
chunk as it lands (``lazyread.rangefetch``, the ranged reads' own fetch). A tensor is handed
over once every byte of it is verified; the first wrong byte stops the load and raises
:class:`TensorMismatch`, naming the file and the tensors of that chunk.

Memory: a tensor's buffer is allocated when the first request that covers it is sent. With a
``working_set``, no request is sent while the tensors allocated and not yet handed over would
pass it, unless nothing else can move (then one tensor more, or a whole file that has no chunk
table, which is verified only whole): what is held stays under ``working_set`` plus that one.
"""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ocibridge.chunks.chunktable import LayerChunks
from ocibridge.errors import DigestMismatch, OcibridgeError
from ocibridge.lazyread.devicering import RING, DeviceCopies, Staging
from ocibridge.lazyread.formats import read_table
from ocibridge.lazyread.frameworks import Framework
from ocibridge.lazyread.headerprefix import HeaderPrefix
from ocibridge.lazyread.landcheck import ChunkDigests, LandCheck, Mismatch, WholeDigest
from ocibridge.lazyread.placement import Landing, Slot, names
from ocibridge.lazyread.rangefetch import ViewsOf, fetch_checked
from ocibridge.lazyread.rangeless import LazySource, WholeWhenRangeless
from ocibridge.lazyread.rangetail import SplitRange
from ocibridge.lazyread.tensorfile import TensorInfo
from ocibridge.lazyread.tensornames import check_tensors
from ocibridge.oci.models import Descriptor

#: bytes asked in one Range request (rounded down to whole chunks), pull's part size: bodies from
#: 16 MiB are received off the socket straight into the tensors (stores/registry/blobstream.DIRECT_MIN)
SPAN = 32 * 1024 * 1024
#: the longest range asked when nothing bounds the memory (``longest_span``): each request costs
#: the client and the registry a connection and its set-up, and on two cores that CPU is the wire's
LONG_SPAN = 128 * 1024 * 1024
#: ranges of a file each request in flight gets at least (a range longer than ``span`` that is
#: still being received when nothing else is left is split: ``lazyread.rangetail``)
RANGES_EACH = 4
#: requests in flight: on the 2-core machine of docs/benchmarks.md, 4 of 32 MiB loaded 1 GiB in
#: 1.37-1.89 s (medians of 4 runs, alternating, load 6-7), 8 in 1.93-2.40 s (more system time)
CONCURRENCY = 4
#: the pieces a file without a chunk table is read and hashed in (its header: the first one)
GRID = 1024 * 1024
#: files whose headers are read ahead of the one being fetched, when memory is bounded
HEADERS_AHEAD = 2


class TensorMismatch(DigestMismatch):
    """Bytes of a file that are not what its chunk table (or its layer digest) names: no tensor
    of them is handed over. ``file``: the file's path in the model; ``tensors``: the tensors
    whose bytes were wrong (every tensor of the file when it has no chunk table)."""

    def __init__(self, message: str, file: str, tensors: tuple[str, ...]):
        super().__init__(message)
        self.file = file
        self.tensors = tensors


@dataclass(frozen=True)
class LoadFile:
    """One tensor file to load: its layer, its entry of the trusted chunk table (None: it
    has none), and the tensors a shard index says it holds (None: no index names it)."""

    path: str
    layer: Descriptor
    chunks: LayerChunks | None
    chunk_size: int
    expected: frozenset[str] | None = None


@dataclass(eq=False)
class _Span:
    start: int
    end: int
    slots: list[Slot]
    copy: bool = False  # the bytes after the header in its last piece: already here
    reading: SplitRange | None = None  # (once sent) its end, which a split moves back


@dataclass(eq=False)
class _File:
    spec: LoadFile
    check: LandCheck
    prefix: bytearray | None = None  # the verified first pieces (the header and what follows it)
    header_end: int = 0
    landing: Landing | None = None  # its tensors' memory, once planned from its header
    spans: list[_Span] = field(default_factory=list)
    next_span: int = 0
    verified: bool = False  # the whole file matched its layer digest (no table)
    tensors: dict[str, TensorInfo] | None = None  # from the header, until the file is planned

    @property
    def unit(self) -> int:
        return self.check.unit


@dataclass(eq=False)
class _Event:
    file: _File
    span: _Span | None  # None: the header
    error: BaseException | None = None
    verified: bool = False


class TensorStream:
    """``(name, tensor)`` pairs as each tensor's bytes are all verified (an iterator); close it,
    or ``with``, to stop early. ``held``: bytes of tensors allocated and not yet handed over
    (``peak_held``: the most there were); ``bytes_fetched``, ``requests``: what was received."""

    def __init__(self, source: LazySource, files: list[LoadFile], framework: Framework, *,
                 concurrency: int = CONCURRENCY, span: int = SPAN, working_set: int | None = None,
                 longest_span: int | None = None, where: str = "", on_close: Callable[[], None] | None = None):
        # (a registry that ignores ranges: each file is read whole once instead)
        self._source = WholeWhenRangeless(source)
        self._framework = framework
        self._files = [_File(f, _check(f)) for f in files]
        # tensors on a device: allocated there, their bytes staged through rings of host memory
        # (files with a chunk table; one without lands in host memory, checked only whole)
        self._device: DeviceCopies | None = framework if isinstance(framework, DeviceCopies) else None
        self._staging = None if self._device is None else \
            Staging(self._device, max([RING] + [f.unit for f in self._files if f.spec.chunks is not None]))
        self._concurrency = max(1, concurrency)
        self._span = span
        self._longest = longest_span
        self._budget = working_set
        self._ahead = len(files) if working_set is None else HEADERS_AHEAD
        self._where = where
        self._on_close = on_close
        self._events: queue.SimpleQueue[_Event] = queue.SimpleQueue()
        self._workers = ThreadPoolExecutor(self._concurrency, thread_name_prefix="load")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._inflight = 0
        self._receiving: list[tuple[_File, _Span, SplitRange]] = []  # the ranges in flight
        self._next_header = 0
        self._current = 0
        self._ready: collections.deque[Slot] = collections.deque()
        self._seen: dict[str, str] = {}  # tensor name -> its file
        self.held = 0
        self.peak_held = 0
        self.bytes_fetched = 0
        self.requests = 0
        self._run = self._loop()

    @property
    def staging_bytes(self) -> int:
        """Host memory the staging rings took (tensors on a device; 0 when the bytes land in host tensors)."""
        return 0 if self._staging is None else self._staging.rings * self._staging.ring_bytes

    @property
    def order(self) -> list[str]:
        """The names of the tensors whose headers were read, in file order and then offset order."""
        return [slot.info.name for file in self._files if file.landing is not None for slot in file.landing.slots]

    # -- the iterator --------------------------------------------------------------------
    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return self

    def __next__(self) -> tuple[str, Any]:
        return next(self._run)

    def close(self) -> None:
        """Stop: requests in flight end at their next chunk; nothing more is handed over."""
        self._run.close()
        self._shutdown()

    def __enter__(self) -> TensorStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _loop(self) -> Generator[tuple[str, Any], None, None]:
        try:
            while True:
                self._fill()
                if self._ready:
                    slot = self._ready.popleft()
                    self.held -= slot.nbytes
                    # (no name in this frame holds the tensor once it is handed over: its memory
                    # is the caller's alone, freed when the caller drops it)
                    yield slot.info.name, self._framework.finish(_take(slot), slot.info)
                    continue
                if self._inflight == 0:
                    if self._current < len(self._files):
                        raise OcibridgeError("the load stalled with requests left to send (a bug)")
                    return
                self._handle(self._events.get())
        finally:
            self._shutdown()

    # -- sending requests ------------------------------------------------------------------
    def _fill(self) -> None:
        """Send what may be sent: headers ahead, then the current file's ranges in order while
        requests are fewer than ``concurrency`` and memory allows."""
        while self._inflight < self._concurrency:
            if self._next_header < len(self._files) and self._next_header <= self._current + self._ahead:
                self._submit(self._files[self._next_header], None)
                self._next_header += 1
                continue
            if self._current >= len(self._files):
                self._share_tails()
                return
            file = self._files[self._current]
            if file.landing is None:  # not planned yet: its header is still on its way
                return
            if file.next_span >= len(file.spans):
                self._current += 1
                continue
            span = file.spans[file.next_span]
            group = span.slots if file.spec.chunks is not None else file.landing.slots
            needed = [s for s in group if not s.allocated]
            cost = sum(s.nbytes for s in needed)
            if (self._budget is not None and needed and self.held + cost > self._budget
                    and (self._inflight or self._ready)):
                return  # wait until tensors are handed over (or nothing else can move)
            self._allocate(needed, self._staged(file))
            file.next_span += 1
            if span.copy:
                self._copy(file, span)
                self._landed(file, span)
            else:
                self._submit(file, span)

    def _staged(self, file: _File) -> bool:
        """Whether ``file``'s bytes pass the staging rings (to tensors on a device)."""
        return self._device is not None and file.spec.chunks is not None

    def _allocate(self, slots: list[Slot], staged: bool = False) -> None:
        for slot in slots:
            if staged and self._device is not None:
                slot.buffer = self._device.allocate_on_device(slot.nbytes)
            else:
                slot.buffer, slot.view = self._framework.allocate(slot.nbytes)
            self.held += slot.nbytes
        self.peak_held = max(self.peak_held, self.held)

    def _copy(self, file: _File, span: _Span) -> None:
        """The bytes after the header in its last piece, received (and checked) with it."""
        assert file.prefix is not None and file.landing is not None
        if self._staged(file) and self._device is not None:
            prefix = memoryview(file.prefix)
            for slot in span.slots:
                first, last = max(span.start, slot.info.start), min(span.end, slot.info.end)
                self._device.write(slot.buffer, first - slot.info.start, prefix[first:last])
        else:
            at = span.start
            for view in file.landing.views(span.start, span.end):
                view[:] = file.prefix[at:at + len(view)]
                at += len(view)
        file.prefix = None

    def _submit(self, file: _File, span: _Span | None) -> None:
        self._inflight += 1
        if span is not None:
            span.reading = SplitRange(span.start, span.end, file.unit)
            self._receiving.append((file, span, span.reading))
        self._workers.submit(self._request, file, span)

    def _share_tails(self) -> None:
        """Nothing is left to ask: an idle request takes the unstarted second half of the range in
        flight with the most left (``span`` at least stays), so a slow connection holds up little."""
        while self._inflight < self._concurrency and self._receiving:
            file, span, reading = max(self._receiving, key=lambda held: held[2].rest)
            given = reading.split(self._span)
            if given is None or file.landing is None:
                return
            cut, end = given
            rest = _Span(cut, end, file.landing.overlapping(cut, end))
            span.end, span.slots = cut, file.landing.overlapping(span.start, cut)
            for slot in rest.slots:
                slot.waiting += slot in span.slots  # (a tensor across the cut now waits for both)
            self._submit(file, rest)

    def _request(self, file: _File, span: _Span | None) -> None:
        """One request, on a pool thread; what came of it goes to the iterating thread."""
        event = _Event(file, span)
        try:
            if span is None:
                self._header(file)
                event.verified = file.verified
            elif self._staged(file) and self._staging is not None:
                landing = file.landing
                assert landing is not None
                with self._staging.ring() as ring:  # (drained before the loader hears of this range)
                    event.verified = self.receive(file, span.start, span.end, ring.views, lambda: ring.send(landing),
                                                  span.reading)
            else:
                assert file.landing is not None
                event.verified = self.receive(file, span.start, span.end, file.landing.views, shared=span.reading)
        except Mismatch as e:
            event.error = self._mismatch(file, e)
        except BaseException as e:  # noqa: BLE001  # raised by the iterating thread
            event.error = e
        self._events.put(event)

    def _header(self, file: _File) -> None:
        prefix = HeaderPrefix(file.spec.layer.size, file.unit, lambda a, b, into: self.receive(file, a, b, into))
        file.tensors, file.header_end = read_table(prefix, file.spec.path)
        file.prefix = prefix.data
        file.verified = prefix.verified

    def receive(self, file: _File, start: int, end: int, views_of: ViewsOf,
                checked: Callable[[], None] | None = None, shared: SplitRange | None = None) -> bool:
        """Bytes ``[start, end)`` of ``file`` in one Range request, into ``views_of(a, b)`` a
        piece (a chunk) at a time, each checked as soon as it is in (then ``checked()``: a
        staged piece goes on to the device; ``shared``: its end may be moved back meanwhile).
        True: the file is now verified whole (no table, and this thread hashed its last byte)."""
        with self._lock:
            self.requests += 1
        return fetch_checked(self._source, file.spec.layer, start, end, file.check, views_of,
                             counted=self._count, where=f"{self._where}: {file.spec.path}",
                             stopped=self._stop.is_set, landed=None if checked is None else lambda _: checked(),
                             shared=shared)

    def _count(self, n: int) -> None:
        with self._lock:
            self.bytes_fetched += n

    # -- what came back ------------------------------------------------------------------------
    def _handle(self, event: _Event) -> None:
        self._inflight -= 1
        if event.span is not None:
            self._receiving = [held for held in self._receiving if held[1] is not event.span]
        if event.error is not None:
            raise event.error
        file = event.file
        if event.span is None:
            self._headed(file)
        else:
            self._landed(file, event.span)
        if event.verified and event.span is not None:
            self._file_verified(file)

    def _headed(self, file: _File) -> None:
        """Plan a file once its header is in: its tensors, checked against the index and the
        framework before any of their bytes is asked for, and its ranges."""
        spec = file.spec
        tensors, file.tensors = file.tensors or {}, None
        check_tensors(spec.path, tensors, spec.expected, self._seen, self._framework)
        landing = Landing([Slot(spec.path, info) for info in tensors.values()])
        assert file.prefix is not None
        have, size = len(file.prefix), spec.layer.size
        spans: list[_Span] = []
        if have > file.header_end:
            spans.append(_Span(file.header_end, have, landing.overlapping(file.header_end, have), copy=True))
        step = self._step(file, size - have)
        for at in range(have, size, step):
            end = min(size, at + step)
            spans.append(_Span(at, end, landing.overlapping(at, end)))
        for span in spans:
            for slot in span.slots:
                slot.waiting += 1
        whole = spec.chunks is None and not file.verified  # its tensors wait for the file's digest too
        for slot in landing.slots:
            slot.waiting += 1 if whole else 0
        file.spans, file.landing = spans, landing
        if not spans:
            file.prefix = None
        for slot in landing.slots:  # tensors of no bytes: nothing to wait for
            if slot.nbytes == 0 and not slot.waiting:
                self._allocate([slot])
                self._ready.append(slot)

    def _step(self, file: _File, left: int) -> int:
        """The bytes of each of ``file``'s ranges (whole chunks) when ``left`` bytes of it are to be
        fetched: ``span``, or with ``longest_span`` and a chunk table, up to that, as long as every
        request in flight still gets RANGES_EACH ranges or more of the file (so that none waits long
        alone at its end)."""
        unit = file.unit
        span = self._span // unit * unit
        if self._longest is not None and file.spec.chunks is not None:
            shared = -(-left // (RANGES_EACH * self._concurrency * unit)) * unit  # (rounded up to whole chunks)
            span = max(span, min(self._longest // unit * unit, shared))
        return max(unit, span)

    def _landed(self, file: _File, span: _Span) -> None:
        for slot in span.slots:
            self._done_one(slot)

    def _file_verified(self, file: _File) -> None:
        file.verified = True
        assert file.landing is not None
        for slot in file.landing.slots:
            self._done_one(slot)

    def _done_one(self, slot: Slot) -> None:
        slot.waiting -= 1
        if slot.waiting == 0:
            if not slot.allocated:
                self._allocate([slot])  # (a tensor of no bytes in a file checked whole)
            self._ready.append(slot)

    def _mismatch(self, file: _File, e: Mismatch) -> TensorMismatch:
        spec = file.spec
        if file.landing is None:
            held = "the file's header"
            tensors: tuple[str, ...] = ()
        else:
            slots = file.landing.overlapping(e.start, e.end)
            tensors = tuple(s.info.name for s in slots)
            held = (f"tensor(s) {names(slots)}" if slots else "no tensor's bytes") + \
                (" and the header" if e.start < file.header_end else "")
        return TensorMismatch(f"{self._where}: {spec.path}: {e.what}; it holds {held}: no tensor is returned",
                              spec.path, tensors)

    # -- the end -----------------------------------------------------------------------------------
    def _shutdown(self) -> None:
        """Stop every request (each ends at its next chunk), wait for them, let go of every buffer."""
        if self._stop.is_set():
            return
        self._stop.set()
        while self._inflight:
            self._events.get()
            self._inflight -= 1
        self._workers.shutdown(wait=True)
        if self._staging is not None:
            self._staging.release()
        self._source.close()
        self._ready.clear()
        for file in self._files:
            file.prefix = None
            for slot in file.landing.slots if file.landing is not None else ():
                slot.buffer = slot.view = None
        if self._on_close is not None:
            self._on_close()


def _take(slot: Slot) -> Any:
    """The slot's buffer, which the slot lets go of."""
    buffer, slot.buffer, slot.view = slot.buffer, None, None
    return buffer


def _check(file: LoadFile) -> LandCheck:
    if file.chunks is not None:
        return ChunkDigests(file.chunks, file.chunk_size)
    return WholeDigest(file.layer.digest, file.layer.size, GRID)
