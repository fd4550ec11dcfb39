"""Hashing a blob in order while its parts arrive out of order, each byte hashed once.

A digest is over the bytes in order, but ranged parts land anywhere. The part writing at the
frontier (the first byte not yet handed to the hasher) hands each buffer it wrote straight to
the hashing thread: on a fast link that is the only part, and the blob is hashed from the
buffers it was received in. Bytes written ahead of the frontier are read back from the page
cache once the frontier reaches them (a part that finished before the one before it).
Buffers come from a small pool, so memory stays bounded whatever the parts do: a hasher that
falls behind makes the parts wait for a buffer.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ocibridge.core import interrupt
from ocibridge.errors import DigestMismatch
from ocibridge.oci.digest import CHUNK, Hasher
from ocibridge.stores.part_governor import PartsAbandoned

BUFFER = 512 * 1024

#: ``(fd, upto)``: bytes ``[0, upto)`` of the file ``fd`` are written and hashed in order; a
#: reader may follow the file as it grows (serve sends them while the blob still arrives).
Frontier = Callable[[int, int], None]


class BufferPool:
    """Up to ``count`` reusable receive buffers of ``BUFFER`` bytes, made as first needed."""

    def __init__(self, count: int):
        self._free: queue.SimpleQueue[bytearray] = queue.SimpleQueue()
        self._left = count
        self._lock = threading.Lock()

    def take(self, stop: threading.Event) -> bytearray:
        with self._lock:
            if self._left and self._free.empty():
                self._left -= 1
                return bytearray(BUFFER)
        while True:
            try:
                return self._free.get(timeout=0.1)
            except queue.Empty:
                if stop.is_set():
                    raise PartsAbandoned from None

    def give(self, buffer: bytearray) -> None:
        self._free.put(buffer)


@dataclass
class _Bytes:
    view: memoryview
    release: Callable[[], None]


@dataclass
class _ReadBack:
    start: int
    end: int


class InOrderHash:
    """The frontier of a blob's hash across its parts; :meth:`run` is the hashing loop."""

    def __init__(self, fd: int, parts: list[tuple[int, int]], written: list[int], hasher: Hasher,
                 on_hashed: Frontier | None = None):
        self._fd = fd
        self._on_hashed = on_hashed
        self._parts = parts
        self._part_size = parts[0][1] - parts[0][0]
        self._size = parts[-1][1]
        self._written = list(written)  # per part: the absolute position written up to
        self._hasher = hasher
        self._frontier = 0  # bytes handed to the hashing loop
        self._lock = threading.Lock()
        self._tasks: queue.SimpleQueue[_Bytes | _ReadBack | BaseException] = queue.SimpleQueue()
        with self._lock:
            self._advance()

    def wrote(self, part: int, start: int, view: memoryview, release: Callable[[], None]) -> None:
        """Part ``part`` wrote ``view`` at ``start``; ``release`` gives its buffer back once
        the bytes are hashed (at once when they are not at the frontier)."""
        with self._lock:
            self._written[part] = start + len(view)
            handed = start == self._frontier
            if handed:
                self._tasks.put(_Bytes(view, release))
                self._frontier += len(view)
            self._advance()
        if not handed:
            release()

    def fail(self, error: BaseException) -> None:
        """A part failed: the hashing loop raises ``error``."""
        self._tasks.put(error)

    def _advance(self) -> None:
        """Hand over, as read-backs, what parts wrote ahead of the frontier that now joins it."""
        while self._frontier < self._size:
            part = self._frontier // self._part_size
            upto = self._written[part]
            if upto <= self._frontier:
                return
            self._tasks.put(_ReadBack(self._frontier, upto))
            self._frontier = upto

    def run(self) -> None:
        """Hash every byte in order (the calling thread); raises what a part raised."""
        hashed = 0
        while hashed < self._size:
            try:
                task = self._tasks.get(timeout=0.2)
            except queue.Empty:
                interrupt.check()
                continue
            if isinstance(task, BaseException):
                raise task
            if isinstance(task, _Bytes):
                self._hasher.update(task.view)
                hashed += len(task.view)
                task.release()
            else:
                _hash_range(self._fd, task.start, task.end, self._hasher)
                hashed += task.end - task.start
            if self._on_hashed is not None:
                self._on_hashed(self._fd, hashed)


def _hash_range(fd: int, start: int, end: int, hasher: Hasher) -> None:
    pos = start
    while pos < end:
        interrupt.check()
        data = os.pread(fd, min(CHUNK, end - pos), pos)
        if not data:
            raise DigestMismatch("the partial file shrank while it was read")
        hasher.update(data)
        pos += len(data)
