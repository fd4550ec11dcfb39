"""Adapters between chunk iterators and file-like readers, and hashing off the reading thread."""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Iterable, Iterator


class IterReader:
    """A read-only file object over an iterator of byte chunks (constant memory).

    Linear in the bytes read, whatever the chunk sizes: a read collects the pieces it needs and
    joins them once, and a big chunk is consumed by position instead of being re-sliced.
    """

    def __init__(self, chunks: Iterable[bytes]):
        self._it: Iterator[bytes] = iter(chunks)
        self._buf = b""
        self._pos = 0
        self._done = False

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            parts = [self._buf[self._pos :], *self._it]
            self._buf, self._pos, self._done = b"", 0, True
            return b"".join(parts)
        parts: list[bytes] = []
        have = 0
        while have < n:
            if self._pos >= len(self._buf):
                if self._done:
                    break
                try:
                    self._buf, self._pos = next(self._it), 0
                except StopIteration:
                    self._buf, self._pos, self._done = b"", 0, True
                continue
            take = min(n - have, len(self._buf) - self._pos)
            whole = self._pos == 0 and take == len(self._buf)
            parts.append(self._buf if whole else self._buf[self._pos : self._pos + take])
            self._pos += take
            have += take
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        close = getattr(self._it, "close", None)
        if close:
            close()

    def __enter__(self) -> IterReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def iter_reader(reader, chunk: int = 1 << 20) -> Iterator[bytes]:
    while data := reader.read(chunk):
        yield data


class BackgroundHasher:
    """A hashlib-like object whose ``update`` runs on a thread of its own, so that hashing a big
    stream overlaps the caller's reading, decompressing and writing (hashlib releases the GIL).

    At most ``depth`` chunks wait to be hashed (constant memory); ``hexdigest`` waits for the
    rest. ``close`` ends the thread when a stream is abandoned before its end.
    """

    def __init__(self, name: str = "sha256", depth: int = 4):
        self._hasher = hashlib.new(name)
        self._queue: queue.Queue[bytes | None] = queue.Queue(depth)
        self._thread = threading.Thread(target=self._run, name="hasher", daemon=True)
        self._thread.start()
        self._closed = False
        self._hexdigest: str | None = None

    def _run(self) -> None:
        while (chunk := self._queue.get()) is not None:
            self._hasher.update(chunk)

    def update(self, data: bytes) -> None:
        if self._closed:
            raise ValueError("update() after hexdigest() or close()")
        self._queue.put(data if isinstance(data, bytes) else bytes(data))  # a buffer may be reused

    def hexdigest(self) -> str:
        if self._hexdigest is None:
            self.close()
            self._hexdigest = self._hasher.hexdigest()
        return self._hexdigest

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join()
