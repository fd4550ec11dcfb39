"""Adapters between chunk iterators and file-like readers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator


class IterReader:
    """A read-only file object over an iterator of byte chunks (constant memory)."""

    def __init__(self, chunks: Iterable[bytes]):
        self._it: Iterator[bytes] = iter(chunks)
        self._buf = b""
        self._done = False

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            parts = [self._buf, *self._it]
            self._buf = b""
            self._done = True
            return b"".join(parts)
        while len(self._buf) < n and not self._done:
            try:
                self._buf += next(self._it)
            except StopIteration:
                self._done = True
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

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
