"""A plain-HTTP body moved from its socket into a file inside the kernel (Linux splice(2)).

Received with ``recv_into``, every byte is copied from the socket into the process and copied
again by the write into the page cache. Through a pipe, splice hands the socket's pages to the
pipe and copies them once, into the file; the hash then reads the file's pages where they lie
(a read-only mapping, stores/inorder_hash.py). Measured on loopback, a 1 GiB pull: 0.46-0.47 s
of system time against 0.59-0.67 s for ``recv_into`` and 32 KiB writes. Where splice is missing
(not Linux) the caller reads the bytes as before; a file system that refuses it gets the
bytes already in the pipe written the ordinary way, and no more splices.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import socket
import sys
import time
import weakref

from ocibridge.core.fsutil import WRITE_MAX, pwrite_all

#: splice(2) is Linux's (os.splice: Python 3.10 on Linux)
AVAILABLE = sys.platform == "linux"
#: The pipe's capacity asked for (Linux's default limit for an unprivileged process,
#: /proc/sys/fs/pipe-max-size); a refusal keeps the default 64 KiB, which only costs calls.
PIPE_BYTES = 1 << 20
#: errors by which a file system says it cannot take spliced pages (then: written from memory)
_REFUSED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV}
#: Bytes put into the file per splice call. A splice write costs more per call than a pwrite:
#: 1 GiB in 32 KiB calls took 0.58 s of system time, as much as receiving and writing it
#: (0.59-0.67 s), against 0.46-0.47 s in 64 KiB, 0.41 in 128 KiB, 0.34 in 1 MiB (alternating
#: runs, load 3-7). Larger calls get larger page-cache folios, several times slower in the
#: stretches when the host takes memory back (docs/transfers.md: 64 KiB writes were 1.1-1.2x
#: of 32 KiB there, 256 KiB up to 1.8x): 64 KiB, the largest measured there.
SPLICE_WRITE = 2 * WRITE_MAX
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ from Python 3.10, named here for the type checker


class ReceiveFailed(Exception):
    """The socket side failed (timed out, reset): the download resumes as after any cut. A
    failure on the file's side is the OSError itself, as a write's would be."""


class Splicer:
    """One pipe, reused for every move of a connection's body into a file."""

    def __init__(self) -> None:
        self._out, self._in = os.pipe2(os.O_CLOEXEC)
        self._closer = weakref.finalize(self, _close, self._out, self._in)  # also when dropped unclosed
        with contextlib.suppress(OSError):
            fcntl.fcntl(self._in, _F_SETPIPE_SZ, PIPE_BYTES)
        #: the file system refused spliced pages once: the caller receives into memory from now
        self.refused = False

    def move(self, sock: socket.socket, fd: int, offset: int, count: int, timeout: float | None) -> int:
        """Up to ``count`` bytes from ``sock`` into ``fd`` at ``offset``: what one read of the
        socket brings (0 only when the peer closed or the socket was shut down). Waits at most
        ``timeout`` seconds for bytes (ReceiveFailed); the socket may be non-blocking (Python's
        socket timeouts make it so): it is polled, never blocked on."""
        started = time.monotonic()
        poller: select.poll | None = None
        while True:
            try:
                n = os.splice(sock.fileno(), self._in, min(count, PIPE_BYTES),
                              flags=os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK)
            except BlockingIOError:  # nothing yet: wait for bytes, the timeout at most
                if poller is None:
                    poller = select.poll()
                    poller.register(sock.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
                left = None if timeout is None else timeout - (time.monotonic() - started)
                if left is not None and left <= 0:
                    raise ReceiveFailed("timed out waiting for the blob's bytes") from None
                poller.poll(None if left is None else int(left * 1000) + 1)
                continue
            except OSError as e:
                raise ReceiveFailed(str(e) or type(e).__name__) from e
            if n:
                self._drain(fd, offset, n)
            return n

    def _drain(self, fd: int, offset: int, n: int) -> None:
        """The ``n`` bytes in the pipe into the file at ``offset``: spliced in calls of at most
        ``SPLICE_WRITE`` bytes, or read out of the pipe and written where the file system does
        not take spliced pages."""
        done = 0
        while done < n:
            if self.refused:
                data = os.read(self._out, min(n - done, WRITE_MAX))
                pwrite_all(fd, data, offset + done)
                done += len(data)
                continue
            try:
                done += os.splice(self._out, fd, min(n - done, SPLICE_WRITE), offset_dst=offset + done,
                                  flags=os.SPLICE_F_MOVE)
            except OSError as e:
                if e.errno not in _REFUSED:
                    raise
                self.refused = True

    def close(self) -> None:
        self._closer()


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
