"""Bytes bound for tensors in device memory (torch, ``device=``), passed through a small ring of
host memory: each piece (a chunk) is received into the ring, checked against the chunk table
there, and only then copied to its tensors on the device, asynchronously (a CUDA stream of its
own per request in flight), so the copies overlap the network and no unverified byte ever
reaches a tensor. Host memory for the device path is bounded: one ring per request in flight,
:data:`RING` bytes each (64 MiB pinned at the default 4 requests), whatever the model's size.

A request's copies are all complete before the loader learns that its range landed (the ring
is drained when the request ends), so a tensor is handed over only once every copy into it is
done. The copying itself is the framework's (:class:`DeviceCopies`): pinned memory and CUDA
streams for CUDA, plain synchronous copies for ``device="cpu"``, which runs this same code.
"""

from __future__ import annotations

import collections
import queue
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

from ocibridge.lazyread.placement import Landing

#: host bytes of one request's ring (at least one piece: a chunk of the table, 1 MiB by default)
RING = 16 * 1024 * 1024


class Lane(Protocol):
    """One request's host buffer and the copies out of it (in order: one CUDA stream)."""

    #: the whole host buffer, writable
    view: memoryview

    def begin(self) -> None:
        """Before the first copy of a request: device work queued before it comes first."""
        ...

    def copy(self, start: int, dst: Any, offset: int, nbytes: int) -> None:
        """Queue a copy of buffer bytes ``[start, start + nbytes)`` into ``dst`` (the tensor's
        byte buffer on the device) at ``offset``."""
        ...

    def mark(self) -> Any:
        """A token for the copies queued so far (None: they are done already)."""
        ...

    def wait(self, token: Any) -> None:
        """Return once the copies before ``token`` are done."""
        ...


@runtime_checkable
class DeviceCopies(Protocol):
    """A framework whose tensors live in device memory: bytes reach them through a :class:`Lane`."""

    def allocate_on_device(self, nbytes: int) -> Any:
        """A tensor's byte buffer of ``nbytes`` on the device, not written."""
        ...

    def lane(self, nbytes: int) -> Lane:
        """A host buffer of ``nbytes`` (pinned for CUDA) and a way to copy out of it."""
        ...

    def write(self, dst: Any, offset: int, data: memoryview) -> None:
        """Copy ``data`` (a few bytes, already verified) into ``dst`` at ``offset``; done on return."""
        ...


class Ring:
    """One lane used as a ring: pieces are received one after the other, wrapping to the start,
    and a piece's place is reused only once the copies out of it are done."""

    def __init__(self, lane: Lane):
        self._lane = lane
        self._size = len(lane.view)
        self._at = 0
        self._pending: collections.deque[tuple[int, int, Any]] = collections.deque()  # (start, end, token)
        self._piece = (0, 0, 0)  # (file offset, ring offset, bytes) of the piece received last

    def begin(self) -> None:
        self._lane.begin()

    def views(self, start: int, end: int) -> list[memoryview]:
        """Where bytes ``[start, end)`` of the file (one piece) are received: a free place of the ring."""
        nbytes = end - start
        assert nbytes <= self._size, f"a piece of {nbytes} bytes is larger than the ring ({self._size})"
        if self._at + nbytes > self._size:
            self._at = 0
        lo, hi = self._at, self._at + nbytes
        while any(a < hi and lo < b for a, b, _ in self._pending):
            self._lane.wait(self._pending.popleft()[2])  # (copies end in order: the oldest first)
        self._at = hi
        self._piece = (start, lo, nbytes)
        return [self._lane.view[lo:hi]]

    def send(self, landing: Landing) -> None:
        """The piece received last is verified: copy its bytes to the tensors that hold them."""
        start, lo, nbytes = self._piece
        for slot in landing.overlapping(start, start + nbytes):
            first, last = max(start, slot.info.start), min(start + nbytes, slot.info.end)
            self._lane.copy(lo + first - start, slot.buffer, first - slot.info.start, last - first)
        token = self._lane.mark()
        if token is not None:
            self._pending.append((lo, lo + nbytes, token))

    def drain(self) -> None:
        """Return once every copy out of the ring is done."""
        if self._pending:
            self._lane.wait(self._pending[-1][2])
            self._pending.clear()
        self._at = 0


class Staging:
    """The rings of one load, one per request in flight, made when first needed and reused."""

    def __init__(self, copies: DeviceCopies, ring_bytes: int):
        self._copies = copies
        self.ring_bytes = ring_bytes
        self._free: queue.SimpleQueue[Ring] = queue.SimpleQueue()
        self.rings = 0  # how many were made (the host memory used: rings × ring_bytes)

    @contextmanager
    def ring(self) -> Iterator[Ring]:
        """A ring for one request, drained when it ends (however it ends)."""
        try:
            ring = self._free.get_nowait()
        except queue.Empty:
            ring = Ring(self._copies.lane(self.ring_bytes))
            self.rings += 1
        ring.begin()
        try:
            yield ring
        finally:
            ring.drain()
            self._free.put(ring)

    def release(self) -> None:
        """Let go of every ring (the load is over)."""
        while True:
            try:
                self._free.get_nowait()
            except queue.Empty:
                return
