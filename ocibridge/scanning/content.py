"""What the scanner reads: a file's bytes by range (``RangeReadable``, as lazy reads give them),
so a check that needs a header reads the header only, and a stream over them for the pickle
library, which reads forward and steps back one byte at a time."""

from __future__ import annotations

import io
import os
from typing import IO, Any, Protocol, runtime_checkable

from ocibridge.lazyread.rangestream import RangeStream
from ocibridge.lazyread.tensorfile import RangeReadable

#: the stream's buffer: a pickle is read forward in pieces of this size
STREAM_PIECE = 1 << 20


class LocalFile:
    """A file on disk, read by ranges."""

    def __init__(self, path: str | os.PathLike[str]):
        self._file = open(path, "rb", buffering=0)  # noqa: SIM115  # (closed by close())
        self.size = os.fstat(self._file.fileno()).st_size

    def read(self, start: int = 0, end: int | None = None) -> bytes:
        end = self.size if end is None else min(end, self.size)
        if end <= start:
            return b""
        self._file.seek(start)
        out = []
        while start < end:
            piece = self._file.read(min(end - start, 1 << 24))
            if not piece:
                break
            out.append(piece)
            start += len(piece)
        return b"".join(out)

    def read_into(self, start: int, view: memoryview) -> int:
        """Fill ``view`` from ``start`` (no copy between: what a pickle's large bytes cost)."""
        self._file.seek(start)
        return self._file.readinto(view) or 0

    def close(self) -> None:
        self._file.close()


@runtime_checkable
class Closable(Protocol):
    """Content that holds something open (a file) until it is closed."""

    def close(self) -> None: ...


class BytesContent:
    """Bytes held in memory (a zip member read whole, a decompressed stream)."""

    def __init__(self, data: bytes):
        self._data = data
        self.size = len(data)

    def read(self, start: int = 0, end: int | None = None) -> bytes:
        return self._data[start:end]


class StreamContent:
    """A seekable stream of known size (a zip member as ``zipfile`` opens it), read by ranges."""

    def __init__(self, stream: IO[bytes], size: int):
        self._stream = stream
        self.size = size

    def read(self, start: int = 0, end: int | None = None) -> bytes:
        end = self.size if end is None else min(end, self.size)
        if end <= start:
            return b""
        self._stream.seek(start)
        return self._stream.read(end - start)


class _RangeRaw(RangeStream):
    """:class:`.rangestream.RangeStream`, reading a local file straight into the buffer."""

    def readinto(self, buffer: Any) -> int:
        if not isinstance(self._source, LocalFile):
            return super().readinto(buffer)
        view = memoryview(buffer).cast("B")
        end = min(self._pos + len(view), self._source.size)
        if end <= self._pos:
            return 0
        n = self._source.read_into(self._pos, view[: end - self._pos])
        self._pos += n
        return n


def stream_of(content: RangeReadable, start: int = 0) -> IO[bytes]:
    """``content`` from ``start`` as a seekable buffered stream."""
    stream = io.BufferedReader(_RangeRaw(content), buffer_size=STREAM_PIECE)
    stream.seek(start)
    return stream
