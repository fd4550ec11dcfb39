"""A file read by ranges as a raw stream (seekable), for a reader that wants a file object: a
header parser, a decompressor."""

from __future__ import annotations

import io
from typing import Any

from ocibridge.lazyread.tensorfile import RangeReadable


class RangeStream(io.RawIOBase):
    """``source`` as a raw stream; each read asks it for the range read."""

    def __init__(self, source: RangeReadable):
        self._source = source
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._source.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        end = min(self._pos + len(view), self._source.size)
        if end <= self._pos:
            return 0
        data = self._source.read(self._pos, end)
        view[: len(data)] = data
        self._pos += len(data)
        return len(data)
