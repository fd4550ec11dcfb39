"""uvicorn's HTTP protocol (httptools, what ``ocibridge[serve]`` installs) with what serve needs
of it that no setting gives:

- the request line and headers bounded while they are parsed (uvicorn keeps every header it is
  sent): more than :data:`.guard.HEADERS_MAX` headers, or more than :data:`.guard.HEAD_MAX` bytes of URL and
  headers, is a 431 and the connection is closed;
- the connection's abort in each request's scope (:data:`.guard.ABORT`), so the guard drops a
  client that stopped reading, unsent bytes and all (a close waits for them to be read);
- a route may take its body's bytes as they are parsed (:data:`.guard.DIVERT`, a :class:`.guard.BodySink`)
  instead of as ASGI messages: a xorb's body (:mod:`.xet.upload`) thus skips, each of its ~4,000
  pieces a GiB, the copy uvicorn makes of it twice, the wake of the route's task and the way
  through every middleware (the event loop's thread 0.69 -> 0.50 s of CPU a GiB published
  over Xet, docs/benchmarks.md);
- a route may send a file's bytes with ``sendfile(2)`` (:data:`.zerocopy.SENDFILE`, a
  :class:`.zerocopy.ZeroCopy`): no copy into Python nor by the server (uvicorn offers no
  ``pathsend``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
import threading
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol, TypeGuard, runtime_checkable

import anyio
import anyio.to_thread
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ocibridge.hubserver.guard import ABORT, DIVERT, HEAD_MAX, HEADERS_MAX, BodySink
from ocibridge.hubserver.zerocopy import SENDFILE, Segment, send_segments, size_of

#: sends by sendfile at once, over every connection (each holds a worker thread while it waits on
#: its client); past it, answers send as ASGI messages
SENDERS = 64


class HeadTooLarge(Exception):
    """The request line and headers went past the limits (raised in the parser's callback)."""


@runtime_checkable
class _UvicornCycle(Protocol):
    """The fields of uvicorn's request cycle that :meth:`GuardedProtocol.divert` reads and sets:
    uvicorn's internals, not its API (it is not pinned), so they are asked for, not assumed."""

    scope: Any
    body: bytes
    more_body: bool
    response_complete: bool
    disconnected: bool
    waiting_for_100_continue: bool


@runtime_checkable
class _UvicornSending(Protocol):
    """The fields of uvicorn's request cycle that :meth:`GuardedProtocol.send_file` reads and
    sets (its answer's state and the Content-Length left to send)."""

    scope: Any
    response_started: bool
    response_complete: bool
    chunked_encoding: bool | None
    expected_content_length: int
    disconnected: bool


@runtime_checkable
class _UvicornConnection(Protocol):
    """The connection's current cycle (None before a request) and its flow control."""

    cycle: Any
    flow: Any


#: whether instances of a type have a protocol's fields, by (type, protocol): ``isinstance``
#: against a runtime protocol looks up each field (~35 µs each, twice a send: ~5 % of a xorb
#: request's CPU), and uvicorn's cycle and connection set theirs in ``__init__``, the same for all
_FITS: dict[tuple[type, type], bool] = {}


def _fits(value: object, protocol: Any) -> bool:
    """``isinstance(value, protocol)``, asked once for each type of ``value``."""
    key = (type(value), protocol)
    found = _FITS.get(key)
    if found is None:
        found = _FITS[key] = isinstance(value, protocol)
    return found


def _is_connection(value: object) -> TypeGuard[_UvicornConnection]:
    return _fits(value, _UvicornConnection)


def _is_sending(value: object) -> TypeGuard[_UvicornSending]:
    return _fits(value, _UvicornSending)


class GuardedProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol`, its request heads bounded, its abort in the scope."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0
        self._head_count = 0
        self._too_large = False
        self._sink: BodySink | None = None
        self._closed = threading.Event()  # set when the connection ends: a send on a thread stops
        self._senders: anyio.CapacityLimiter | None = None

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = self._head_count = 0
        self._sink = None
        self.scope[ABORT] = self._reset  # type: ignore[literal-required]
        self.scope[DIVERT] = partial(self.divert, self.scope)  # type: ignore[literal-required]
        self.scope[SENDFILE] = partial(self.send_file, self.scope)  # type: ignore[literal-required]

    def divert(self, scope: Any, sink: BodySink) -> tuple[Callable[[], None], Callable[[], None]] | None:
        """From now on hand the body of the request of ``scope`` to ``sink`` (what uvicorn holds
        of it first), and reading resumed: the sink paces it with the ``(pause, resume)``
        answered. None when its body is whole already, or its connection lost (or that request
        is no longer the one being parsed): the route reads it as ASGI messages then."""
        connection: object = self
        cycle = connection.cycle if isinstance(connection, _UvicornConnection) else None
        if (not isinstance(cycle, _UvicornCycle) or self.scope is not scope or cycle.scope is not scope
                or cycle.response_complete or not cycle.more_body or cycle.disconnected):
            return None  # (also a uvicorn whose fields these are not: the ASGI way, not an error)
        if cycle.waiting_for_100_continue and not self.transport.is_closing():  # as uvicorn's first receive
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            cycle.waiting_for_100_continue = False
        self._sink = sink
        held = bytes(cycle.body)
        cycle.body = cycle.body[:0]
        if held:
            sink.feed(held)
        self.flow.resume_reading()
        return self.flow.pause_reading, self.flow.resume_reading

    async def send_file(self, scope: Any, fd: int, segments: list[Segment], timeout: float) -> int | None:
        """Send ``segments`` of ``fd`` as the next body bytes of the answer of ``scope``
        (:class:`.zerocopy.ZeroCopy`): their count, or None where it cannot now."""
        connection: object = self
        cycle = connection.cycle if _is_connection(connection) else None
        transport = self.transport
        count = size_of(segments)
        if (not _is_sending(cycle) or cycle.scope is not scope or not cycle.response_started
                or cycle.response_complete or cycle.chunked_encoding is not False or cycle.disconnected
                or count > cycle.expected_content_length or transport.is_closing()
                or transport.get_extra_info("sslcontext") is not None
                or transport.get_extra_info("ssl_object") is not None):
            return None
        sock = transport.get_extra_info("socket")
        if sock is None:
            return None
        for _ in range(3):  # the head (or a piece) written last: the loop flushes it as it turns
            if transport.get_write_buffer_size() == 0:
                break
            await asyncio.sleep(0)
        else:
            return None  # the client has not taken what the server holds: send as messages
        if self._senders is None:
            self._senders = _senders()
        if self._senders.available_tokens < 1:
            return None
        # a socket of its own on a copy of the descriptor: never another connection's number,
        # whatever the server closes meanwhile
        mine = socket.socket(fileno=os.dup(sock.fileno()))
        try:
            sent = await anyio.to_thread.run_sync(send_segments, mine, fd, segments, timeout, self._closed,
                                                  limiter=self._senders)
        finally:
            mine.close()
        cycle.expected_content_length -= sent
        return sent

    def on_body(self, body: bytes) -> None:
        sink = self._sink
        if sink is None or self.cycle.response_complete:
            super().on_body(body)
            return
        sink.feed(body)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        sink, self._sink = self._sink, None
        if sink is not None:
            sink.end()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed.set()
        sink, self._sink = self._sink, None
        super().connection_lost(exc)
        if sink is not None:
            sink.lost()

    def _reset(self) -> None:
        """Drop the connection now: a reset (linger 0), so the kernel drops what it holds for
        the client too rather than trickling it out to a client that reads nothing."""
        self._closed.set()
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, ValueError):  # (ValueError: closed already)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    def _count(self, size: int, headers: int = 0) -> None:
        self._head_bytes += size
        self._head_count += headers
        if self._head_bytes > HEAD_MAX or self._head_count > HEADERS_MAX:
            self._too_large = True
            raise HeadTooLarge  # httptools stops parsing; uvicorn answers (send_400_response below)

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4, 1)
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        if not self._too_large:
            super().send_400_response(msg)
            return
        body = (f'{{"error":"the request line and headers are larger than serve takes ({HEADERS_MAX} '
                f'headers, {HEAD_MAX} bytes)"}}').encode()
        self.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                             b"content-type: application/json\r\n"
                             b"x-error-message: the request line and headers are too large\r\n"
                             b"content-length: " + str(len(body)).encode() + b"\r\n"
                             b"connection: close\r\n\r\n" + body)
        self.transport.close()


_SENDERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anyio.CapacityLimiter] = weakref.WeakKeyDictionary()


def _senders() -> anyio.CapacityLimiter:
    """The loop's limiter of sendfile threads (an anyio limiter belongs to one loop; tests run many)."""
    loop = asyncio.get_running_loop()
    if loop not in _SENDERS:
        _SENDERS[loop] = anyio.CapacityLimiter(SENDERS)
    return _SENDERS[loop]
