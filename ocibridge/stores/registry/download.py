"""Blob downloads: a reader that streams a registry blob and resumes with Range.

When the connection drops or the body ends short, the reader asks again from the byte it has
(``Range: bytes=N-``); parts of a ranged download ask for their own byte span (the connection's
side is blobstream.py). Uploads are in upload.py.
"""

from __future__ import annotations

import collections
import contextlib
import queue
import threading
import time
import weakref
from concurrent.futures import Future, ThreadPoolExecutor

from ocibridge.core.closing import ClosesOnExit
from ocibridge.errors import OcibridgeError
from ocibridge.oci.digest import Hasher
from ocibridge.oci.models import Descriptor
from ocibridge.stores.registry.blobstream import BlobStream, BytesHook, StreamStopped
from ocibridge.stores.registry.client import RegistryClient

#: At most this many pieces waiting in the queue of a blob's prefetch thread (memory bound),
PREFETCH_PIECES = 4
#: Parts of a ranged download are handed over in smaller pieces, without a prefetch thread:
#: what was received is on disk sooner, so a killed run loses less of each part.
RANGE_PIECE = 256 * 1024
#: and blobs up to this size are read without a thread.
PREFETCH_MIN = 256 * 1024
#: close() waits this long (seconds) for a prefetch thread to end.
CLOSE_WAIT = 5.0


class BlobDownload(ClosesOnExit):
    """A raw reader over a registry blob that resumes after drops; wrap it to verify.

    Blobs over ``PREFETCH_MIN`` are received by a thread of their own into a bounded queue
    (``PREFETCH_PIECES`` × ``PIECE`` bytes), so receiving overlaps the caller's work; with
    ``hasher``, every piece is also hashed into it on another thread, overlapping the caller's
    writing, before the end is handed over (see HashingReader). Done in turn on one thread,
    a 1 GiB pull took 3.5-4× curl's time. Errors of those threads are raised by ``read``;
    ``close`` stops them and waits for them.
    """

    def __init__(self, client: RegistryClient, repository: str, desc: Descriptor,
                 on_bytes: BytesHook | None = None, hasher: Hasher | None = None,
                 start: int = 0, end: int | None = None, piece: int | None = None,
                 ask_range: bool = False):
        self.desc = desc
        self._stop = threading.Event()
        self._stream = BlobStream(client, repository, desc, on_bytes, self._stop, start, end, ask_range)
        self._hasher = hasher
        self._queue: queue.Queue[bytes | BaseException] = queue.Queue(PREFETCH_PIECES)
        self._thread: threading.Thread | None = None
        self._prefetch = piece is None and self._stream.end - start > PREFETCH_MIN
        if piece is not None:
            self._stream.piece = piece
        self._buf = b""
        self._pos = 0
        self._eof = False
        self._error: BaseException | None = None
        # a reader dropped unclosed must not leave its thread waiting (for room, for bytes)
        weakref.finalize(self, _abandon, self._stop, self._stream)

    @property
    def offset(self) -> int:
        return self._stream.offset

    @property
    def ranged(self) -> bool:
        """Whether the server honoured the Range asked (a 206 answer)."""
        return self._stream.ranged

    def read_whole_answer(self) -> None:
        """(a reader whose Range was ignored, before its first read) Read the blob that answer
        carries whole: from byte 0, not from the range's start, to the blob's end."""
        self._stream.keep_whole_answer()

    # -- pieces ----------------------------------------------------------------------------
    def _piece(self) -> bytes:
        if self._error is not None:
            raise self._error
        if self._eof:
            return b""
        if not self._prefetch:
            piece = self._stream.next_piece()
            if self._hasher is not None:
                self._hasher.update(piece)
        else:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=_prefetch, args=(self._stream, self._queue, self._stop, self._hasher),
                    name=f"blob-{self.desc.digest[7:19]}", daemon=True)
                self._thread.start()
            item = self._get()
            if isinstance(item, BaseException):
                self._error = item
                raise item
            piece = item
        if not piece:
            self._eof = True
        return piece

    def _get(self) -> bytes | BaseException:
        while True:
            try:
                return self._queue.get(timeout=1.0)
            except queue.Empty:
                assert self._thread is not None
                if not self._thread.is_alive() and self._queue.empty():
                    return OcibridgeError(f"download of {self.desc.digest} stopped unexpectedly")

    def _take(self, n: int) -> bytes:
        """Up to ``n`` bytes of the current piece."""
        pos = self._pos
        data = self._buf[pos : pos + n]  # the piece itself when it is all taken: no copy
        self._pos = pos + len(data)
        if self._pos >= len(self._buf):
            self._buf, self._pos = b"", 0
        return data

    # -- file API -------------------------------------------------------------------------
    def read(self, n: int = -1) -> bytes:
        """``n`` bytes (fewer only at the end); all the rest when ``n`` is negative."""
        if n is None or n < 0:
            parts = [self._take(len(self._buf))]
            while piece := self._piece():
                parts.append(piece)
            return b"".join(parts)
        parts, have = [], 0  # one join per read: a single part is returned as it is
        while have < n:
            if self._pos >= len(self._buf):
                self._buf, self._pos = self._piece(), 0
                if not self._buf:
                    break
            data = self._take(n - have)
            parts.append(data)
            have += len(data)
        return b"".join(parts)

    def readinto(self, buffer: memoryview) -> int:
        """Fill ``buffer`` (fewer bytes only at the end; 0 after it). Received straight
        into it when the download has no prefetch thread (a part of a ranged pull)."""
        view = buffer.cast("B") if buffer.format != "B" else buffer
        if self._prefetch or self._pos < len(self._buf):
            data = self.read(len(view))
            view[: len(data)] = data
            return len(data)
        got = 0
        while got < len(view):
            n = self._stream.next_into(view[got:])
            if not n:
                break
            got += n
        return got

    def land_into(self, fd: int, offset: int, count: int) -> int | None:
        """Up to ``count`` next bytes written into ``fd`` at ``offset`` (0 only at the end of
        the range), spliced inside the kernel where the connection allows it; None where it
        does not (a prefetched or TLS body, a rate limit, not Linux): read with readinto."""
        if self._prefetch or self._pos < len(self._buf) or not self._stream.spliceable():
            return None
        return self._stream.land_into(fd, offset, count)

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        """Stop the prefetch thread and wait for it, a bounded time: a socket read is cut
        short, but a reconnect in progress is not; the thread then ends when that returns."""
        self._stop.set()
        thread = self._thread
        if thread is None:
            self._stream.close()
            self._stream.close_pipe()
            return
        deadline = time.monotonic() + CLOSE_WAIT
        while thread.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                self._queue.get_nowait()  # room for a put it may be blocked in
            self._stream.interrupt()
            thread.join(0.05)


def _prefetch(stream: BlobStream, pieces: queue.Queue[bytes | BaseException], stop: threading.Event,
              hasher: Hasher | None) -> None:
    """The prefetch thread: pieces, then ``b""``, or the exception, into the queue.

    With ``hasher``, a second thread hashes each piece while the reader writes it and this
    thread receives the next (hashlib releases the GIL); the end goes into the queue only
    once every piece is hashed. No reference to the BlobDownload is held, so a reader dropped
    unclosed is collected and its finalizer sets ``stop``."""
    hashing = ThreadPoolExecutor(1, "blob-hash") if hasher is not None else None
    pending: collections.deque[Future[None]] = collections.deque()
    try:
        while True:
            piece = stream.next_piece()
            if hashing is not None and hasher is not None:
                if piece:
                    pending.append(hashing.submit(hasher.update, piece))
                while pending and (not piece or len(pending) > PREFETCH_PIECES):
                    pending.popleft().result()  # bounded: never more pieces held for hashing
            if not _offer(pieces, piece, stop) or not piece:
                return
    except StreamStopped:
        pass
    except BaseException as e:  # noqa: BLE001 - raised again by the reader's read()
        _offer(pieces, e, stop)
    finally:
        stream.close()
        if hashing is not None:
            hashing.shutdown(wait=True, cancel_futures=True)


def _abandon(stop: threading.Event, stream: BlobStream) -> None:
    stop.set()
    stream.interrupt()


def _offer(pieces: queue.Queue[bytes | BaseException], item: bytes | BaseException, stop: threading.Event) -> bool:
    """Put ``item`` once there is room; False if the reader stopped first."""
    while not stop.is_set():
        try:
            pieces.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False
