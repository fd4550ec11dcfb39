"""Hashing a blob in order while its parts arrive out of order, each byte hashed once.

A digest is over the bytes in order, but ranged parts land anywhere. The part writing at the
frontier (the first byte not yet handed to the hasher) hands each buffer it wrote straight to
the hashing thread: on a fast link that is the only part, and the blob is hashed from the
buffers it was received in. Bytes written ahead of the frontier (a part that finished before
the one before it), and bytes spliced into the file with no buffer of ours (``landed``), are
hashed from the page cache once the frontier reaches them, mapped read-only rather than copied.
Buffers come from a small pool, so memory stays bounded whatever the parts do: a hasher that
falls behind makes the parts wait for a buffer (spliced bytes wait in the page cache, which
is not the process's memory; the mapping is at most ``MAP_WINDOW`` bytes).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import queue
import sys
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
        self._taken: _Bytes | _ReadBack | BaseException | None = None  # the next task, taken early
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

    def landed(self, part: int, upto: int) -> None:
        """Part ``part`` wrote the file up to ``upto`` with no buffer of ours (spliced): those
        bytes are hashed from the file once the frontier reaches them."""
        with self._lock:
            self._written[part] = upto
            self._advance()

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
            task, self._taken = self._taken, None
            if task is None:
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
                end = self._joined(task)
                hash_file_range(self._fd, task.start, end, self._hasher)
                hashed += end - task.start
            if self._on_hashed is not None:
                self._on_hashed(self._fd, hashed)

    def _joined(self, task: _ReadBack) -> int:
        """The end of ``task`` and of the read-backs queued right behind it that continue it
        (landed bytes come in many small hand-overs): hashed as one range. A task taken that
        does not continue it is kept to be the next."""
        end = task.end
        while True:
            try:
                nxt = self._tasks.get_nowait()
            except queue.Empty:
                return end
            if isinstance(nxt, _ReadBack) and nxt.start == end and end - task.start < MAP_WINDOW:
                end = nxt.end
                continue
            self._taken = nxt
            return end


#: The most of a file mapped at once to be hashed where its pages lie.
MAP_WINDOW = 8 << 20


def hash_file_range(fd: int, start: int, end: int, hasher: Hasher) -> None:
    """Bytes ``[start, end)`` of ``fd`` into ``hasher``, read where the page cache holds them
    (a read-only mapping of at most ``MAP_WINDOW`` bytes at a time: no copy into the process);
    read with pread where the file cannot be mapped."""
    pos = start
    while pos < end:
        interrupt.check()
        base = pos - pos % mmap.ALLOCATIONGRANULARITY
        upto = min(end, base + MAP_WINDOW)
        try:
            mapped = mmap.mmap(fd, upto - base, flags=mmap.MAP_SHARED | _POPULATE, prot=mmap.PROT_READ,
                               offset=base)
        except (OSError, ValueError):
            _pread_range(fd, pos, upto, hasher)
        else:
            _hash_mapped(mapped, pos - base, hasher)
        pos = upto


#: map the pages at once (Linux), not one page fault at a time
_POPULATE = mmap.MAP_POPULATE if sys.platform == "linux" else 0


def _hash_mapped(mapped: mmap.mmap, skip: int, hasher: Hasher) -> None:
    """``mapped`` from ``skip`` on into ``hasher``; the mapping closed after."""
    try:
        view = memoryview(mapped)[skip:]
        try:
            hasher.update(view)
        finally:
            view.release()
    finally:
        with contextlib.suppress(BufferError):  # a hasher kept a view: closed when that goes
            mapped.close()


def _pread_range(fd: int, start: int, end: int, hasher: Hasher) -> None:
    pos = start
    while pos < end:
        interrupt.check()
        data = os.pread(fd, min(CHUNK, end - pos), pos)
        if not data:
            raise DigestMismatch("the partial file shrank while it was read")
        hasher.update(data)
        pos += len(data)
