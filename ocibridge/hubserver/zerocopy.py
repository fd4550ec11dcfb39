"""Sending a file's bytes to the client's socket from a worker thread: by ``sendfile(2)`` from the
page cache (no copy into Python, none by the server), or, for bytes with heads between them (a
xorb's chunks behind their 8-byte headers), through a pipe by ``splice(2)``: each head written
into it, the file's pages spliced in by reference, the pipe spliced to the socket a full pipe at
a time (1 MiB). Warm reads over Xet cost serve 0.25 s of CPU a GiB with it, 0.29 with the bytes
gathered by ``preadv`` into a buffer and sent (docs/benchmarks.md "serve's warm Xet sends");
that way stays where splice is missing (not Linux) or a file system refuses it.

uvicorn 0.54 offers no ASGI ``http.response.pathsend`` nor ``zerocopysend``, and uvloop has no
``loop.sendfile``; serve's own protocol (:mod:`.protocol`) puts a :class:`ZeroCopy` in each
request's scope under :data:`SENDFILE` instead. It sends on a worker thread, on a copy of the
connection's descriptor (so the number is never another connection's once the server closes
its own), only while the server holds nothing unsent for that connection: the bytes go out in
order after the answer's head, and the server is told they went (its count of the
Content-Length). Where it cannot (TLS, a write still queued, another request's answer on the
connection, h11) it answers None and the caller sends the bytes as ASGI messages, as before.

A client that reads nothing for ``timeout`` seconds is dropped (the guard's send timeout); one
that leaves ends the send. Measured (1 GiB, loopback, docs/benchmarks.md "serve's reads against
their floor"): on loopback it costs what a copy costs (serve's warm plain read 0.14 s of CPU a GiB
before and after, the machine's floor 0.13 s); what it saves is a buffer and the ASGI layers per
piece, and on a NIC with offloads the copy itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from ocibridge.hubserver.guard import ABORT, SEND_LIMIT

log = logging.getLogger("ocibridge.serve")

#: the scope key of the connection's :class:`ZeroCopy` (set by :class:`.protocol.GuardedProtocol`)
SENDFILE = "ocibridge.sendfile"
#: the scope key of the metrics' count of bytes sent past them (:mod:`.metrics`)
BODY_SENT = "ocibridge.body_sent"
#: the send timeout where no guard set one (serve always runs the guard: tests of the app alone)
UNGUARDED_TIMEOUT = 30.0
#: bytes gathered into one buffer per send where segments have heads and splice is refused
GATHER = (1 << 20) + (1 << 7)
#: segments with heads go through a pipe by splice(2) (Linux's; os.splice from Python 3.10)
SPLICE = sys.platform == "linux"
#: the pipe's capacity asked for (Linux's default limit for an unprivileged process); a refusal
#: keeps the default 64 KiB, which only costs calls
PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ from Python 3.10, named here for the type checker
#: errors by which a file system says it cannot splice a file's pages (then: gathered by preadv)
_REFUSED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP}
#: milliseconds between looks at whether the connection was closed, while the client reads nothing
POLL_MS = 250


class ClientGone(Exception):
    """The client closed the connection (or the server did) during a send."""


class ClientStalled(Exception):
    """The client read nothing for the send timeout."""


#: ``(head, offset, count)``: ``head``'s bytes, then bytes ``[offset, offset + count)`` of the file
Segment = tuple[bytes, int, int]


class ZeroCopy(Protocol):
    async def __call__(self, fd: int, segments: list[Segment], timeout: float) -> int | None:
        """Send ``segments`` of the file ``fd`` as the answer's next body bytes: the count sent
        (all of them, else it raises :class:`ClientGone`, :class:`ClientStalled` or the file's
        error), or None when it cannot now (send them as ASGI messages instead)."""
        ...


def size_of(segments: list[Segment]) -> int:
    return sum(len(head) + count for head, _, count in segments)


def send_segments(sock: socket.socket, fd: int, segments: list[Segment], timeout: float,
                  closed: threading.Event) -> int:
    """``segments`` of ``fd`` to the non-blocking socket ``sock`` (a worker thread's loop,
    polling while the socket is full); the bytes sent (all of them). File bytes alone go by
    sendfile; segments with heads (a xorb's chunks, each behind its 8-byte header) through a
    pipe (:func:`_spliced`), else gathered into one buffer by one ``preadv`` and sent with one
    ``send``: a sendfile and a send a 64 KiB chunk cost more system calls than the copy saves
    (measured: docs/benchmarks.md)."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLOUT)
    idle_since = time.monotonic()

    def wait() -> None:
        events = poller.poll(POLL_MS)
        if any(e & (select.POLLERR | select.POLLHUP) for _, e in events):
            raise ClientGone("the connection was lost")
        if not events and time.monotonic() - idle_since > timeout:
            raise ClientStalled(f"the client read nothing for {timeout:g} s")

    def step(send: Callable[[], int]) -> int:
        nonlocal idle_since
        while True:
            if closed.is_set():
                raise ClientGone("the connection was closed")
            try:
                n = send()
            except BlockingIOError:
                wait()
                continue
            except (BrokenPipeError, ConnectionResetError) as e:
                raise ClientGone(str(e)) from e
            idle_since = time.monotonic()
            return n

    if any(head for head, _, _ in segments):
        spliced = _spliced(sock, fd, segments, step) if SPLICE else None
        if spliced is not None:
            return spliced
        buffer = bytearray(max(GATHER, max(len(h) + n for h, _, n in segments)))  # reused: each send is whole
        total = 0
        for window in _windows(segments):
            view = _gathered(fd, window, buffer)
            while view:
                view = view[step(partial(sock.send, view)):]
            total += size_of(window)
        return total
    total = 0
    for _, offset, count in segments:
        while count:
            n = step(partial(os.sendfile, sock.fileno(), fd, offset, count))
            if n == 0:
                raise OSError(f"the file ended {count} bytes early")
            offset += n
            count -= n
            total += n
    return total


def _spliced(sock: socket.socket, fd: int, segments: list[Segment],
             step: Callable[[Callable[[], int]], int]) -> int | None:
    """``segments`` through a pipe of their own: each head written into it, the file's bytes
    spliced into it (references to the page cache's pages, no copy), and the pipe spliced to the
    socket each time it is full and at the end; the count sent, or None where the file system
    refuses to splice the file before a byte went (the caller gathers the bytes instead)."""
    out, into = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        with contextlib.suppress(OSError):
            fcntl.fcntl(into, _F_SETPIPE_SZ, PIPE_BYTES)
        held = sent = 0

        def drain(more: int = os.SPLICE_F_MORE) -> None:  # MSG_MORE: more bytes follow at once
            nonlocal held, sent
            while held:
                n = step(partial(os.splice, out, sock.fileno(), held, flags=more))
                held -= n
                sent += n

        for head, offset, count in segments:
            while head:
                try:
                    held += os.write(into, head)  # at most 8 bytes: all of it or none
                    head = b""
                except BlockingIOError:
                    drain()
            while count:
                try:
                    n = os.splice(fd, into, count, offset_src=offset)
                except BlockingIOError:  # the pipe is full
                    drain()
                    continue
                except OSError as e:
                    if e.errno in _REFUSED and sent == 0:
                        return None
                    raise
                if n == 0:
                    raise OSError(f"the file ended {count} bytes early")
                held += n
                offset += n
                count -= n
        drain(0)  # the last: pushed out now
        return sent
    finally:
        os.close(out)
        os.close(into)


def _windows(segments: list[Segment]) -> list[list[Segment]]:
    """``segments`` in runs of at most :data:`GATHER` bytes (a segment larger alone)."""
    out: list[list[Segment]] = [[]]
    held = 0
    for segment in segments:
        size = len(segment[0]) + segment[2]
        if out[-1] and held + size > GATHER:
            out.append([])
            held = 0
        out[-1].append(segment)
        held += size
    return out


def _gathered(fd: int, segments: list[Segment], buffer: bytearray) -> memoryview:
    """The bytes of ``segments`` in ``buffer`` (the view of them): the heads written, the file's
    bytes read into their places at once (one ``preadv`` where they lie end to end in the file,
    as a xorb's do)."""
    view = memoryview(buffer)[:size_of(segments)]
    targets: list[memoryview] = []
    at = 0
    for head, _, count in segments:
        view[at:at + len(head)] = head
        targets.append(view[at + len(head):at + len(head) + count])
        at += len(head) + count
    run: list[memoryview] = []
    first = end = 0
    for (_, start, count), target in zip(segments, targets, strict=True):
        if run and start != end:  # not where the run ends: read the run, start another
            _read_into(fd, run, first)
            run = []
        if not run:
            first = start
        run.append(target)
        end = start + count
    if run:
        _read_into(fd, run, first)
    return view


def _read_into(fd: int, targets: list[memoryview], offset: int) -> None:
    want = sum(len(t) for t in targets)
    if os.preadv(fd, targets, offset) != want:
        raise OSError(f"the file ended before byte {offset + want}")


async def send_direct(scope: Any, fd: int, segments: list[Segment]) -> int | None:
    """Send ``segments`` of ``fd`` by sendfile as the next body bytes of the answer of ``scope``
    (counted in the metrics as sent): the count, or None where the server takes none now (no
    serve protocol, TLS, bytes it still holds). Raises :class:`ClientGone` or
    :class:`ClientStalled` (the caller aborts the connection: :func:`drop`)."""
    zero: ZeroCopy | None = scope.get(SENDFILE)
    if zero is None:
        return None
    sent = await zero(fd, segments, scope.get(SEND_LIMIT, UNGUARDED_TIMEOUT))
    counted: Callable[[int], None] | None = scope.get(BODY_SENT)
    if sent is not None and counted is not None:
        counted(sent)
    return sent


async def drop(scope: Any, why: ClientGone | ClientStalled) -> None:
    """Drop the connection of a send that failed on its client (logged when it stalled), and let
    the server hear of it: the answer is then lost, not failed."""
    abort: Callable[[], None] | None = scope.get(ABORT)
    if abort is not None:
        abort()
    if isinstance(why, ClientStalled):
        log.info("%s %s: closed a connection that read nothing: %s", scope["method"], scope.get("path", ""), why)
    await asyncio.sleep(0)
