"""Sending a file's bytes to the client's socket from a worker thread: by ``sendfile(2)`` from the
page cache (no copy into Python, none by the server), or, for bytes with heads between them (a
xorb's chunks behind their 8-byte headers), heads and the file's pages put into a pipe in order
and spliced from it into the socket (Linux; elsewhere a send and a sendfile each).

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
#: whether segments with heads go through a pipe by ``splice(2)`` (Linux's)
SPLICE = sys.platform == "linux"
#: bytes of that pipe (Linux's largest for a user by default: ``/proc/sys/fs/pipe-max-size``)
PIPE = 1 << 20
_SETPIPE_SZ = 1031  # fcntl's F_SETPIPE_SZ (Linux)
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
    sendfile. Segments with heads (a xorb's chunks, each behind its 8-byte header) go through
    a pipe (:func:`_send_piped`), where Linux has ``splice``; elsewhere a head's ``send`` and a
    chunk's sendfile each."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLOUT)
    idle_since = time.monotonic()
    out = sock.fileno()

    def wait() -> None:
        events = poller.poll(POLL_MS)
        if any(e & (select.POLLERR | select.POLLHUP) for _, e in events):
            raise ClientGone("the connection was lost")
        if not events and time.monotonic() - idle_since > timeout:
            raise ClientStalled(f"the client read nothing for {timeout:g} s")

    def step(send: Callable[[], int]) -> int:
        """``send()``, waited for while the socket is full: the bytes it took (some)."""
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

    if SPLICE and any(head for head, _, _ in segments):
        return _send_piped(fd, segments, lambda pipe, n: step(partial(os.splice, pipe, out, n)))
    total = 0
    for head, offset, count in segments:
        while head:
            n = step(partial(sock.send, head))
            head = head[n:]
            total += n
        while count:
            n = step(partial(os.sendfile, out, fd, offset, count))
            if n == 0:
                raise OSError(f"the file ended {count} bytes early")
            offset += n
            count -= n
            total += n
    return total


def _send_piped(fd: int, segments: list[Segment], drain: Callable[[int, int], int]) -> int:
    """``segments`` put into a pipe in order, each head written, the file's bytes spliced (the
    page cache's pages referenced, not copied), and the pipe spliced into the socket whenever it
    is full (``drain(pipe, count)``: some of ``count`` bytes of the pipe sent). The file's bytes
    thus leave as sendfile sends them, with no system call to the socket per 64 KiB chunk: each
    sendfile or send to a socket pays for a segment's way through TCP (measured: a xorb's 8-byte
    heads and 64 KiB chunks sent one call each cost serve twice the plain route's system time,
    docs/benchmarks.md "warm Xet reads")."""
    r, w = os.pipe2(os.O_NONBLOCK)
    held = 0

    def flush() -> None:
        nonlocal held
        if not held:
            raise OSError("the pipe took none of the bytes")  # not full: no drain makes room
        while held:
            held -= drain(r, held)

    try:
        with contextlib.suppress(OSError):  # past the user's pipe budget: the pipe stays smaller
            fcntl.fcntl(w, _SETPIPE_SZ, PIPE)
        for head, offset, count in segments:
            while head:
                try:
                    n = os.write(w, head)
                except BlockingIOError:
                    flush()
                    continue
                head = head[n:]
                held += n
            while count:
                try:
                    n = os.splice(fd, w, count, offset_src=offset, flags=os.SPLICE_F_NONBLOCK)
                except BlockingIOError:
                    flush()
                    continue
                if n == 0:
                    raise OSError(f"the file ended {count} bytes early")
                offset += n
                count -= n
                held += n
        if held:
            flush()
        return size_of(segments)
    finally:
        os.close(r)
        os.close(w)


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
