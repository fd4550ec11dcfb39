"""How large an upload's next PATCH chunk is, and how soon the chunk in flight will be done.

Chunks are sized by time, not bytes: each takes about :data:`CHUNK_SECONDS` at the rate the
previous ones went, and at least :data:`WAIT_SHARE` times the wait for its answer. Every
chunk costs that wait (distribution finishes writing, closes the upload, stores and fsyncs its
hash state, answers; the next PATCH reopens it), ~50-100 ms on a loaded loopback, so on a fast
link chunks must be large (32 MiB chunks made a 1 GiB push 1.2-1.6× one PUT); a chunk of a
few seconds keeps it a few per cent, and is what a ``kill -9`` loses at most when the
registry keeps the session. A Ctrl-C does not depend on the size: a streamed chunk ends early
(see upload.py). Chunks are sent streamed, of a fixed size too (``--chunk-size``: every chunk
that size, but able to end early, so a Ctrl-C at any chunk size and rate leaves a session the
registry keeps); only the registry's ``OCI-Chunk-Min-Length`` makes them Content-Range chunks
(a chunk ended early could be shorter than that minimum, and refused).
"""

from __future__ import annotations

import threading
import time

MiB = 1024 * 1024
#: The first chunk, sent before any rate is known.
FIRST_CHUNK = 8 * MiB
#: A chunk should take this long, wait for the answer included,
CHUNK_SECONDS = 2.0
#: and at least this many times the wait for its answer.
WAIT_SHARE = 20
#: Bounds: the smallest chunk, the largest, and how much a chunk may outgrow the one before.
MIN_CHUNK = 4 * MiB
MAX_CHUNK = 1024 * MiB
GROWTH = 4


class ChunkClock:
    """Times an upload's chunks (thread-safe reads: an interrupt asks from the main thread).
    With ``fixed``, every chunk has that size (``--chunk-size``), else they are sized by time;
    either way they are ``streamed`` unless ``ranged`` (the registry's minimum length)."""

    def __init__(self, fixed: int | None = None, min_chunk: int = 0):
        self.fixed = max(fixed, min_chunk) if fixed else None
        self.min_chunk = max(MIN_CHUNK, min_chunk)
        #: Content-Range chunks of the fixed size, each sent to its end (the registry's minimum)
        self.ranged = min_chunk > 0
        self._next = self.fixed or max(FIRST_CHUNK, self.min_chunk)
        self._lock = threading.Lock()
        self._size = 0  # of the chunk in flight
        self._sent = 0  # of its bytes handed to the socket
        self._started = 0.0
        self._last_byte = 0.0
        self.rate: float | None = None  # bytes/s over the last answered chunk, its wait included
        self.wait: float | None = None  # seconds from its last byte handed over to its answer
        #: no chunk larger than this (a body cap the registry or a proxy before it has)
        self.cap: int | None = None

    @property
    def streamed(self) -> bool:
        """Whether chunks go as streamed bodies (that may end early), not Content-Range ones."""
        return not self.ranged

    def require(self, minimum: int) -> None:
        """The registry's smallest chunk (``OCI-Chunk-Min-Length``): fixed chunks of at least
        that (a streamed chunk ended early could be shorter, and refused)."""
        with self._lock:
            self.min_chunk = max(self.min_chunk, minimum)
            self.fixed = max(self.fixed or self._next, minimum)
            self._next = self.fixed
            self.ranged = True

    def next_size(self, left: int) -> int:
        """The size of the next chunk, ``left`` bytes being still to send."""
        return max(1, min(self._next, left, self.cap or left))

    def started(self, size: int) -> None:
        with self._lock:
            self._size, self._sent = size, 0
            self._started = self._last_byte = time.monotonic()

    def sent(self, n: int) -> None:
        with self._lock:
            self._sent += n
            self._last_byte = time.monotonic()

    def answered(self) -> int:
        """The registry confirmed the chunk in flight: learn from it, size the next one.
        Returns the bytes it held (fewer than planned for a streamed chunk ended early)."""
        now = time.monotonic()
        with self._lock:
            size, took = self._sent, max(now - self._started, 1e-6)
            self.rate = size / took
            self.wait = now - self._last_byte
            self._size = 0
            if self.fixed:
                return size
            seconds = max(CHUNK_SECONDS, WAIT_SHARE * self.wait)
            wanted = int(self.rate * seconds)
            self._next = max(self.min_chunk, min(wanted, MAX_CHUNK, GROWTH * max(size, self.min_chunk)))
            return size

    def seconds_to_finish(self) -> float | None:
        """Expected seconds until the chunk in flight is answered if it ends as soon as it can:
        a streamed chunk at once, so the last chunk's wait (0 before any answer: the
        interrupt's limit bounds a wrong guess); a ranged one after its bytes not yet handed
        over, at the last chunk's rate, plus that wait (None before any answer). None with no
        chunk in flight (or the lock held: asked from a signal handler, the thread it
        interrupted may hold it)."""
        if not self._lock.acquire(timeout=0.05):
            return None
        try:
            if not self._size:
                return None
            if self.streamed:
                return self.wait or 0.0
            if self.rate is None or self.wait is None:
                return None
            return (self._size - self._sent) / self.rate + self.wait
        finally:
            self._lock.release()
