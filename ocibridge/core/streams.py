"""Adapters between chunk iterators and file-like readers, and hashing off the reading thread."""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Protocol, cast, runtime_checkable

from ocibridge.core.closing import ClosesOnExit

#: bytes per read when streaming a blob or a body (its home is here, below the OCI models, so that
#: the private core's readers and decoders use it without importing up into ``ocibridge.oci``)
CHUNK = 1 << 20

if TYPE_CHECKING:  # imported where a tar is read: every registry command imports this module
    import tarfile


class Reader(Protocol):
    """Anything read chunk by chunk: files, tar/zip members, HTTP bodies, decompressors, verifiers.

    Functions that only call ``read`` take this instead of ``BinaryIO``, so a verifying wrapper or
    an iterator adapter is as welcome as a real file.
    """

    def read(self, n: int = -1, /) -> bytes: ...


class ClosableReader(Reader, Protocol):
    """A reader that owns something to release (a file, a response, a decompressor)."""

    def close(self) -> None: ...


@runtime_checkable
class Seekable(Protocol):
    """A reader that may go back: ``seekable()`` says whether it really can (a pipe cannot)."""

    def seekable(self) -> bool: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...


@runtime_checkable
class Batched(Protocol):
    """A reader whose bytes can be had instead as batches of views of its own buffers, each
    batch valid until the next is asked for: a sender hands them on as they are, not copied
    into reads of its own."""

    def batches(self) -> Iterator[Sequence[memoryview]]: ...


def can_seek(reader: object) -> bool:
    """Whether ``reader`` can be sent back to an earlier offset."""
    if not isinstance(reader, Seekable):
        return False
    try:
        return bool(reader.seekable())
    except (OSError, ValueError):  # closed, or a file object that cannot tell
        return False


@runtime_checkable
class Closable(Protocol):
    """Something holding what it must release: a file, a connection pool (a store)."""

    def close(self) -> None: ...


def close_if_closable(thing: object) -> None:
    """Close ``thing`` when it has anything to close; plain iterator adapters and stores held
    in memory have not."""
    if isinstance(thing, Closable):
        thing.close()


def close_reader(reader: Reader) -> None:
    """Close ``reader`` when it has anything to close."""
    close_if_closable(reader)


def gunzip(raw: Reader) -> Reader:
    """A forward-only gzip decoder over ``raw``.

    GzipFile's stub asks for ``seek`` as well, but only GzipFile.seek/rewind call it, and no
    caller here seeks: a one-way stream (an HTTP body, a verifying reader) is enough.
    """
    import gzip

    return gzip.GzipFile(fileobj=cast(IO[bytes], raw), mode="rb")


def open_tar_stream(raw: Reader) -> tarfile.TarFile:
    """Read a tar archive front to back ("r|"): only ``read`` is ever called on ``raw``."""
    import tarfile

    return tarfile.open(fileobj=cast(IO[bytes], raw), mode="r|")


def unzstd(raw: Reader, *, max_window_size: int = 0, read_size: int | None = None) -> Reader:
    """A zstd decoder over ``raw`` reading across frames (pzstd/zstd -T write several).

    zstandard's stub names IO[bytes], but the decoder only ever calls ``read`` on its source.
    """
    import zstandard

    dctx = zstandard.ZstdDecompressor(max_window_size=max_window_size)
    source = cast(IO[bytes], raw)
    if read_size is None:
        return dctx.stream_reader(source, read_across_frames=True)
    return dctx.stream_reader(source, read_size=read_size, read_across_frames=True)


class PassingReader(ClosesOnExit):
    """A reader standing in for ``raw`` (a subclass sees each read): its seeks, position and close
    pass through, so that an upload can still resume by seeking it."""

    def __init__(self, raw: IO[bytes]):
        self._raw = raw

    def read(self, n: int = -1) -> bytes:
        return self._raw.read(n)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return can_seek(self._raw)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def close(self) -> None:
        self._raw.close()


class IterReader(ClosesOnExit):
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
            rest = [self._buf[self._pos :], *self._it]
            self._buf, self._pos, self._done = b"", 0, True
            return b"".join(rest)
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
        if isinstance(self._it, Closable):  # a generator: its finally blocks run now
            self._it.close()


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

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
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
