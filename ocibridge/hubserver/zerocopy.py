"""Sending a file's bytes to the client with ``sendfile(2)``: from the page cache to the socket,
no copy into Python and none by the server.

uvicorn 0.54 offers no ASGI ``http.response.pathsend`` nor ``zerocopysend``, and uvloop has no
``loop.sendfile``; serve's own protocol (:mod:`.protocol`) puts a :class:`ZeroCopy` in each
request's scope under :data:`SENDFILE` instead. It sends on a worker thread, on a copy of the
connection's descriptor (so the number is never another connection's once the server closes
its own), only while the server holds nothing unsent for that connection: the bytes go out in
order after the answer's head, and the server is told they went (its count of the
Content-Length). Where it cannot (TLS, a write still queued, another request's answer on the
connection, h11) it answers None and the caller sends the bytes as ASGI messages, as before.

A client that reads nothing for ``timeout`` seconds is dropped (the guard's send timeout); one
that leaves ends the send. Measured (1 GiB, loopback, docs/benchmarks.md): serve's CPU for a
warm download over the plain route 0.31 -> see the table there.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger("ocibridge.serve")

#: the scope key of the connection's :class:`ZeroCopy` (set by :class:`.protocol.GuardedProtocol`)
SENDFILE = "ocibridge.sendfile"
#: the scope key of the guard's send timeout, seconds (:class:`.guard.Guard`)
SEND_LIMIT = "ocibridge.send_timeout"
#: the scope key of the metrics' count of bytes sent past them (:mod:`.metrics`)
BODY_SENT = "ocibridge.body_sent"
#: the send timeout where no guard set one (serve always runs the guard: tests of the app alone)
UNGUARDED_TIMEOUT = 30.0
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
    """``segments`` of ``fd`` to the non-blocking socket ``sock`` (a worker thread's loop:
    send and sendfile, and poll while the socket is full); the bytes sent (all of them)."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLOUT)
    idle_since = time.monotonic()

    def wait() -> None:
        nonlocal idle_since
        events = poller.poll(POLL_MS)
        if any(e & (select.POLLERR | select.POLLHUP) for _, e in events):
            raise ClientGone("the connection was lost")
        if not events and time.monotonic() - idle_since > timeout:
            raise ClientStalled(f"the client read nothing for {timeout:g} s")

    total = 0
    for head, offset, count in segments:
        view = memoryview(head)
        while view or count:
            if closed.is_set():
                raise ClientGone("the connection was closed")
            try:
                if view:  # the head goes with the file's bytes that follow it (one packet, not two)
                    n = sock.send(view, socket.MSG_MORE if count else 0)
                    view = view[n:]
                else:
                    n = os.sendfile(sock.fileno(), fd, offset, count)
                    if n == 0:
                        raise OSError(f"the file ended {count} bytes early")
                    offset += n
                    count -= n
            except BlockingIOError:
                wait()
                continue
            except (BrokenPipeError, ConnectionResetError) as e:
                raise ClientGone(str(e)) from e
            total += n
            idle_since = time.monotonic()
    return total


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
    from ocibridge.hubserver.guard import ABORT  # (the guard imports this module)

    abort: Callable[[], None] | None = scope.get(ABORT)
    if abort is not None:
        abort()
    if isinstance(why, ClientStalled):
        log.info("%s %s: closed a connection that read nothing: %s", scope["method"], scope.get("path", ""), why)
    await asyncio.sleep(0)
