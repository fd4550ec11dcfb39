"""What every request and answer of serve passes through, whatever its route (an ASGI
middleware): the limits that keep a greedy or slow client from holding what others need.

- **Bodies**: a body declared larger than :attr:`Limits.body` (a Xet upload's:
  :attr:`Limits.upload`; an LFS object's PUT: :attr:`Limits.lfs_upload`; a commit's, which
  carries small files inline: :attr:`Limits.commit`) is refused (413, the Hub's error
  shape) before a byte of it is read; one sent in chunks is counted as it is read and refused
  once past the limit. The connection is closed after such an answer (and after any answer that
  left a chunked body unread), so the rest is never read either.
- **Header values** of every answer are made fit for HTTP here, the one place: a control
  character (NUL, CR, LF, ...) becomes a space, so no text from a request (a revision, a path)
  reaches the wire as a header of its own or makes the server drop the connection.
- **Slow readers**: each write of an answer gets :attr:`Limits.send_timeout` seconds; a
  connection that takes longer is closed (aborted: its unsent bytes are dropped, not kept until
  it reads). A write still waiting after :attr:`Limits.stall` seconds gives back the send permit
  its answer holds (:class:`Turn`), so clients that stop reading never hold the capacity that
  others share; the answer takes a permit again before it reads its next piece. One client
  (a read token) holds at most its share of those permits (:class:`Shares`), and a connection
  one answer at a time: one permit.

Header count and size are bounded where they are parsed (:mod:`.protocol`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ocibridge.hubserver.answers import error
from ocibridge.hubserver.routing import raw_route_path, route_path

log = logging.getLogger("ocibridge.hubserver")

#: bytes of a request body (a paths-info list of 10,000 long paths fits)
BODY_MAX = 2 * 1024 * 1024
#: bytes of an upload's body (a Xet xorb or shard), under the paths of :data:`UPLOAD_PATHS`
UPLOAD_MAX = 96 * 1024 * 1024
UPLOAD_PATHS = ("/xet-write/",)
#: bytes of an LFS object PUT under :data:`UPLOADS` (its route checks it is the size it was granted)
LFS_UPLOAD_MAX = 1 << 40
#: the path under which LFS objects are PUT (lfs/routes.py's UPLOAD_PATH)
UPLOADS = "/ocibridge/lfs/"
#: bytes of a commit's body (the Hub's limit of a commit's inline files); its route reads it a
#: line at a time, staging each file as it comes (writeroutes/commit.py), one line at most 16 MiB
COMMIT_MAX = 1 << 30
#: a commit's route (raw: ``/api/models/REPO/commit/REVISION``, or a dataset's, the revision's ``/`` quoted)
COMMIT_PATH = re.compile(r"/api/(?:models|datasets)/[^/]+(?:/[^/]+)?/commit/[^/]+")
#: headers of a request (:mod:`.protocol` counts them as they are parsed)
HEADERS_MAX = 100
#: bytes of a request's URL and headers together
HEAD_MAX = 64 * 1024
#: paths of one paths-info request
PATHS_MAX = 10_000
#: seconds one write of an answer may take before its connection is closed
SEND_TIMEOUT = 30.0
#: seconds a write may wait on its client before its answer gives back its send permit
STALL = 0.5
#: where the transport's abort is put in the scope by :mod:`.protocol`
ABORT = "ocibridge.abort"
#: where the send timeout is put in the scope: a body sent by sendfile waits on its client as
#: long (:mod:`.zerocopy`)
SEND_LIMIT = "ocibridge.send_timeout"
#: where the answer's :class:`Turn` is put in the scope
TURN = "ocibridge.turn"
#: where the request's body limit is put in the scope, for a route that takes its body past the
#: middlewares (:mod:`.xet.diverted`): it raises :class:`BodyTooLarge` past it, as :class:`Guard` would
BODY_LIMIT = "ocibridge.body_limit"
#: where a middleware that counts the bytes of bodies read puts how to tell it of bytes read past
#: it (:mod:`.xet.diverted`): called with their count
BODY_READ = "ocibridge.body_read"
#: where a request's scope holds how to divert its body (:meth:`.protocol.GuardedProtocol.divert`): called
#: with a :class:`BodySink`, it answers the connection's ``(pause, resume)`` of reading, or None
#: when the body cannot be diverted (it is read as ASGI messages then, as without this protocol)
DIVERT = "ocibridge.divert"
Divert = Callable[["BodySink"], "tuple[Callable[[], None], Callable[[], None]] | None"]


class BodySink(Protocol):
    """What takes a diverted body, on the event loop's thread, in order."""

    def feed(self, data: bytes) -> None:
        """A piece of the body."""

    def end(self) -> None:
        """The body is whole (the route then reads the last ASGI message, an empty one)."""

    def lost(self) -> None:
        """The connection was lost before the body was whole."""


_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


@dataclass(frozen=True)
class Limits:
    """What one request may take (docs/security.md lists each)."""

    body: int = BODY_MAX
    upload: int = UPLOAD_MAX
    lfs_upload: int = LFS_UPLOAD_MAX  # a PUT under UPLOADS
    commit: int = COMMIT_MAX  # a POST to COMMIT_PATH
    send_timeout: float = SEND_TIMEOUT
    stall: float = STALL


class BodyTooLarge(Exception):
    """A chunked body went past the limit while it was read."""


class ClientStalled(Exception):
    """A write waited longer than the send timeout: the connection is closed."""


class Shares:
    """Send permits shared by every client: at most ``total`` held at once, at most ``each`` by
    one client (a read token's name; "" is every anonymous client of an open server, whose
    share is the whole). A client at its share waits on its own turn, holding none of the
    shared permits meanwhile, so another client always finds one."""

    def __init__(self, total: int, each: int) -> None:
        self.total = total
        self.each = max(1, min(each, total))
        self._gate = asyncio.Semaphore(total)
        self._shares: dict[str, tuple[asyncio.Semaphore, list[int]]] = {}  # client -> its permits, users

    def _share(self, client: str) -> tuple[asyncio.Semaphore, list[int]]:
        found = self._shares.get(client)
        if found is None:
            found = self._shares[client] = (asyncio.Semaphore(self.each if client else self.total), [0])
        return found

    async def take(self, client: str) -> None:
        share, users = self._share(client)
        users[0] += 1
        try:
            await share.acquire()
            try:
                await self._gate.acquire()
            except BaseException:
                share.release()
                raise
        except BaseException:
            self._left(client)
            raise

    def give(self, client: str) -> None:
        self._gate.release()
        self._shares[client][0].release()
        self._left(client)

    def _left(self, client: str) -> None:
        users = self._shares[client][1]
        users[0] -= 1
        if not users[0]:  # nobody holds or waits for this client's share: forgotten
            del self._shares[client]


class Turn:
    """An answer's permit of a shared gate of senders (the Xet xorb answers'), which the guard
    takes back while a write stalls: :meth:`take` before reading a piece, held while it is sent."""

    def __init__(self) -> None:
        self._held: tuple[Shares, str] | None = None

    @property
    def held(self) -> bool:
        return self._held is not None

    async def take(self, gate: Shares, client: str = "") -> None:
        if self._held is None:
            await gate.take(client)
            self._held = (gate, client)

    def give_back(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held[0].give(held[1])


def turn_of(scope: Scope) -> Turn:
    """The request's :class:`Turn` (a fresh one when the app runs without the guard)."""
    found = scope.get(TURN)
    return found if isinstance(found, Turn) else Turn()


def clean_header(value: bytes) -> bytes:
    """A header value with no control character (each one a space)."""
    return _CONTROL.sub(b" ", value)


def _declared_length(scope: Scope) -> tuple[int | None, bool]:
    """The body's declared length (None: none declared), and whether it is sent in chunks."""
    length: int | None = None
    chunked = False
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            text = value.strip()
            length = int(text) if text.isdigit() and len(text) <= 20 else -1
        elif name == b"transfer-encoding":
            chunked = True
    return length, chunked


class Guard:
    """The ASGI middleware: body limits, clean header values and bounded writes (the module's
    docstring)."""

    def __init__(self, app: ASGIApp, limits: Limits | None = None) -> None:
        self.app = app
        self.limits = limits or Limits()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limits = self.limits
        if scope["method"] == "PUT" and route_path(scope).startswith(UPLOADS):
            limits = replace(limits, body=limits.lfs_upload)  # an LFS object: its route bounds it to its grant
        elif route_path(scope).startswith(UPLOAD_PATHS):
            limits = replace(limits, body=limits.upload)  # an upload: its route bounds it further
        elif scope["method"] == "POST" and COMMIT_PATH.fullmatch(raw_route_path(scope)):
            limits = replace(limits, body=limits.commit)  # read a line at a time: its route bounds each
        length, chunked = _declared_length(scope)
        if length is not None and (length < 0 or length > limits.body):
            await _refuse(scope, receive, send, limits.body)
            return
        turn = Turn()
        scope[TURN] = turn
        scope[SEND_LIMIT] = limits.send_timeout  # a body sent by sendfile waits on its client as long (zerocopy.py)
        scope[BODY_LIMIT] = limits.body
        abort: Callable[[], None] | None = scope.get(ABORT)
        started = False
        unread = chunked
        stalled = False
        taken = 0

        async def counted() -> Message:
            nonlocal taken, unread
            message = await receive()
            if message["type"] == "http.request":
                taken += len(message.get("body", b""))
                if taken > limits.body:
                    raise BodyTooLarge
                if not message.get("more_body", False):
                    unread = False
            return message

        async def bounded(message: Message) -> None:
            nonlocal started, stalled
            if message["type"] == "http.response.start":
                started = True
                headers = [(n, clean_header(v)) for n, v in message.get("headers", [])]
                if unread:  # a chunked body the route did not read: not read after the answer either
                    headers.append((b"connection", b"close"))
                await send({**message, "headers": headers})
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            writing = asyncio.ensure_future(send(message))
            try:
                done, _ = await asyncio.wait({writing}, timeout=limits.stall)
                if not done:
                    turn.give_back()  # this client is not reading: others send meanwhile
                    done, _ = await asyncio.wait({writing}, timeout=max(0.0, limits.send_timeout - limits.stall))
                if not done:
                    stalled = True
                    if abort is not None:
                        abort()  # its unsent bytes dropped now, not kept until it reads
                    writing.cancel()
                    raise ClientStalled
                writing.result()
            except asyncio.CancelledError:
                writing.cancel()
                raise

        try:
            await self.app(scope, counted, bounded)
        except BodyTooLarge:
            if started:
                raise
            await _refuse(scope, receive, send, limits.body)
        except Exception:
            if not stalled:
                raise
            log.info("%s %s: closed a connection that read nothing for %g s", scope["method"],
                     scope.get("path", ""), limits.send_timeout)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0)  # the abort reaches the server: the connection is lost, not failed
        finally:
            turn.give_back()


async def _refuse(scope: Scope, receive: Receive, send: Send, limit: int) -> None:
    """413 in the Hub's shape, the connection closed after it: the body is never read."""
    answer = error(413, None, f"the request body is larger than serve takes ({limit} bytes)",
                   {"Connection": "close"})
    await answer(scope, receive, send)
