"""A scriptable loopback reverse proxy that injects registry faults for tests.

Put it in front of a real registry, add rules (method + path regex → action), point the client
at `proxy.host`, and assert on `proxy.requests`. Bodies are streamed both ways in 64 KiB
pieces (chunked request bodies are re-chunked), Range headers pass through untouched, and the
registry's absolute `Location` headers are rewritten to point back at the proxy.

    proxy.add("GET", r"/blobs/sha256:", drop_response(after=1000))       # mid-blob disconnect
    proxy.add("PUT", r"/blobs/uploads/", status(429, retry_after=1), times=2)
    proxy.add("GET", r"/blobs/", corrupt(offset=0))                      # wrong digest
    proxy.add("PUT", r"/manifests/", lose_response())                   # done, but unheard
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

PIECE = 64 * 1024
HOP_BY_HOP = frozenset(
    {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
        "trailer", "trailers", "transfer-encoding", "upgrade", "expect", "proxy-connection",
    }
)


# -- actions ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Status:
    """Answer `code` without asking the registry (e.g. 429 with Retry-After, 500, 503)."""

    code: int
    retry_after: float | None = None
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    name: str = "status"


@dataclass(frozen=True)
class DropResponse:
    """Forward the response but close the connection after `after` body bytes."""

    after: int
    name: str = "drop_response"


@dataclass(frozen=True)
class Truncate:
    """Keep the registry's Content-Length but send `missing` bytes fewer, then close."""

    missing: int = 1
    name: str = "truncate"


@dataclass(frozen=True)
class Corrupt:
    """Flip (xor 0xFF) the response body byte at `offset`: same length, wrong digest."""

    offset: int = 0
    name: str = "corrupt"


@dataclass(frozen=True)
class CorruptAt:
    """Flip (xor 0xFF) byte `offset` of the blob in every answer that carries it (a 206 body
    starts where its Content-Range says, a 200 at 0): the range holding that byte is wrong, and
    no other, whatever order the ranges are asked in."""

    offset: int
    name: str = "corrupt_at"


@dataclass(frozen=True)
class DropRequest:
    """Read `after` request-body bytes (forwarded to the registry when `forward`), then close
    both connections without answering: an upload cut mid-stream."""

    after: int
    forward: bool = True
    name: str = "drop_request"


@dataclass(frozen=True)
class LoseResponse:
    """Forward the request, let the registry act on it, then close without answering:
    the client cannot tell whether it happened (retries must be idempotent)."""

    name: str = "lose_response"


@dataclass(frozen=True)
class Delay:
    """Wait `seconds` before forwarding (for client timeouts), or until `release` is set (a
    request kept on its way while a test looks, for no longer than it needs)."""

    seconds: float
    release: threading.Event | None = None
    name: str = "delay"


@dataclass(frozen=True)
class Throttle:
    """Forward, but pace the request and response bodies to `rate` bytes per second (a slow
    link: long transfers to interrupt, to count, to resume); the first `unpaced` bytes of each
    body at once (what a test waits for before it interrupts, with no wait for them), and the
    rest once `release` is set (the test has seen what it needed the slow link for)."""

    rate: float
    unpaced: int = 0
    release: threading.Event | None = None
    name: str = "throttle"


@dataclass(frozen=True)
class Stall:
    """Forward, but send only the first `after` response body bytes, then nothing until `release`
    is set (by the test, or by the proxy after `timeout` seconds), then the rest at `rate` bytes
    per second: one connection much slower than the others, whose bytes the client takes are
    counted closely (a paced writer is at most a piece ahead of its reader)."""

    after: int
    release: threading.Event
    rate: float
    timeout: float = 10.0
    name: str = "stall"


@dataclass(frozen=True)
class IgnoreRange:
    """Forward without the Range header: a server (or proxy) that answers 200 to Range;
    ``flip``: also flip (xor 0xFF) that byte of the whole blob it sends (a forged answer)."""

    flip: int | None = None
    name: str = "ignore_range"


@dataclass(frozen=True)
class BufferRequest:
    """Read the whole request body before forwarding anything, as nginx does by default
    (``proxy_request_buffering on``): a client cut mid-body reaches the registry as no
    request at all. ``rate`` (bytes per second) paces the reading, as Throttle does."""

    rate: float | None = None
    name: str = "buffer_request"


@dataclass(frozen=True)
class Reroute:
    """Forward the request under another path: with ``skip=1`` on a tag's manifest path, the
    tag names one manifest the first time it is asked and another afterwards (a tag moved
    between a check and a use)."""

    path: str
    name: str = "reroute"


@dataclass(frozen=True)
class CapBody:
    """Read the whole request body first (as Cloudflare or nginx does); one over ``limit``
    bytes is answered ``code`` and never reaches the registry, a smaller one is forwarded."""

    limit: int
    code: int = 413
    body: bytes = b"<html><head><title>413 Request Entity Too Large</title></head></html>"
    name: str = "cap_body"


@dataclass(frozen=True)
class Serve:
    """Answer from ``handler(proxy, request, body)`` (the request body read first): a quirk
    that needs the body, or answers a route the registry does not have."""

    handler: Callable[[FaultProxy, RecordedRequest, bytes], Status]
    name: str = "serve"


@dataclass(frozen=True)
class Hold:
    """Stop the request until ``release`` is set, then cut the client's connection: a process
    killed mid-request, seen from the network. ``after=None``: before a byte reaches the
    upstream; ``after=N``: once N body bytes were forwarded (the upstream sees the body end
    early); ``answered``: once the upstream answered (done, but never heard). The test waits
    for the moment on the record (``rec.request_bytes``, ``rec.answered``)."""

    release: threading.Event
    after: int | None = None
    answered: bool = False
    forward: bool = True  # as DropRequest's: the first ``after`` bytes are sent
    name: str = "hold"


Action = (Status | DropResponse | Truncate | Corrupt | CorruptAt | DropRequest | LoseResponse | Delay
          | Throttle | Stall | IgnoreRange | BufferRequest | Reroute | CapBody | Serve | Hold)


class Quirk(Protocol):
    """A standing behaviour of a registry (tests/support/profiles.py): consulted for every
    request before the rules (which apply when no quirk acts); may answer or transform it,
    and rewrite the response's headers."""

    def on_request(self, proxy: FaultProxy, rec: RecordedRequest) -> Action | None: ...

    def on_response(self, rec: RecordedRequest, status: int,
                    headers: list[tuple[str, str]]) -> list[tuple[str, str]]: ...


def status(code: int, retry_after: float | None = None, body: bytes = b"",
           headers: dict[str, str] | None = None) -> Status:
    return Status(code, retry_after, body, tuple((headers or {}).items()))


def too_many_requests(retry_after: float = 1) -> Status:
    return Status(
        429,
        retry_after,
        b'{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down (fault proxy)"}]}',
    )


def server_error(code: int = 500) -> Status:
    return Status(code, None, b'{"errors":[{"code":"UNKNOWN","message":"fault proxy"}]}')


def drop_response(after: int) -> DropResponse:
    return DropResponse(after)


def truncate(missing: int = 1) -> Truncate:
    return Truncate(missing)


def corrupt(offset: int = 0) -> Corrupt:
    return Corrupt(offset)


def corrupt_at(offset: int) -> CorruptAt:
    return CorruptAt(offset)


def drop_request(after: int, forward: bool = True) -> DropRequest:
    return DropRequest(after, forward)


def hold(release: threading.Event, *, after: int | None = None, answered: bool = False) -> Hold:
    return Hold(release, after, answered)


def lose_response() -> LoseResponse:
    return LoseResponse()


class _QuietServer(ThreadingHTTPServer):
    """A client that closes its connection between requests (serve dropping a registry
    connection it no longer needs) is not an error worth a traceback in the test log."""

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]  # socketserver types them loosely


def delay(seconds: float, release: threading.Event | None = None) -> Delay:
    return Delay(seconds, release)


def throttle(rate: float, unpaced: int = 0, release: threading.Event | None = None) -> Throttle:
    return Throttle(rate, unpaced, release)


def stall(after: int, release: threading.Event, rate: float, timeout: float = 10.0) -> Stall:
    return Stall(after, release, rate, timeout)


def buffer_request(rate: float | None = None) -> BufferRequest:
    return BufferRequest(rate)


def ignore_range(flip: int | None = None) -> IgnoreRange:
    return IgnoreRange(flip)


def reroute(path: str) -> Reroute:
    return Reroute(path)


def _pace(action: Action | None, n: int, done: int) -> None:
    """Sleep for the ``n`` bytes just sent at the action's rate (``done``: the body's bytes so far,
    these too), past a throttle's unpaced bytes; a stall's wait once its first bytes are sent."""
    if isinstance(action, Stall) and done >= action.after:
        if not action.release.wait(action.timeout):
            action.release.set()  # (the wait is over for the rest of the body too)
        if done > action.after:
            time.sleep(n / action.rate)
        return
    if isinstance(action, Throttle) and action.release is not None and action.release.is_set():
        return
    if isinstance(action, Throttle) and action.unpaced:
        n = min(n, max(0, done - action.unpaced))
    if isinstance(action, (Throttle, BufferRequest)) and action.rate and n:
        time.sleep(n / action.rate)


# -- rules and records -----------------------------------------------------------------------
@dataclass
class Rule:
    """Apply `action` to matching requests: skip the first `skip`, then at most `times`
    (None = every one). `matched`/`applied` count what happened."""

    method: str | None
    path: re.Pattern[str]
    action: Action
    times: int | None = 1
    skip: int = 0
    matched: int = 0
    applied: int = 0

    def matches(self, method: str, target: str) -> bool:
        return (self.method is None or self.method == method) and bool(self.path.search(target))

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.applied >= self.times


@dataclass
class RecordedRequest:
    """One request as the proxy saw it, and what it did with it."""

    method: str
    path: str  # request target: path and query
    headers: dict[str, str]  # lower-case names
    action: str | None = None
    status: int | None = None  # status sent to the client, None when cut before answering
    upstream_status: int | None = None  # what the registry answered, if it was asked
    request_bytes: int = 0  # request body bytes read from the client
    response_bytes: int = 0  # response body bytes sent to the client
    upstream_location: str | None = None
    time: float = field(default_factory=time.time)  # when the request arrived
    answered: float | None = None  # when the registry's answer arrived (what it did is done by then)
    last_sent: float | None = None  # when response body bytes were last sent

    @property
    def range(self) -> str | None:
        return self.headers.get("range")

    @property
    def content_range(self) -> str | None:
        return self.headers.get("content-range")


class Upstream(Protocol):
    url: str


class FaultProxy:
    """Threaded HTTP reverse proxy on 127.0.0.1 in front of `upstream` (a registry or URL)."""

    def __init__(self, upstream: Upstream | str, ca_file: Path | str | None = None,
                 timeout: float = 60.0) -> None:
        url = upstream if isinstance(upstream, str) else upstream.url
        if ca_file is None and not isinstance(upstream, str):
            ca_file = getattr(upstream, "ca_file", None)
        parts = urlsplit(url)
        self.upstream_url = f"{parts.scheme}://{parts.netloc}"
        self.upstream_netloc = parts.netloc
        self._upstream_tls = parts.scheme == "https"
        self._ssl = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
        self.timeout = timeout
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._requests: list[RecordedRequest] = []
        #: standing behaviours (a registry profile), after the rules
        self.quirks: list[Quirk] = []
        server = _QuietServer(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def point_at(self, upstream: str) -> None:
        """Forward to ``upstream`` from now on: for a server that must know the proxy's URL
        before it starts (``serve --public-url``), the proxy is made first."""
        parts = urlsplit(upstream)
        self.upstream_url = f"{parts.scheme}://{parts.netloc}"
        self.upstream_netloc = parts.netloc
        self._upstream_tls = parts.scheme == "https"

    # -- scripting ------------------------------------------------------------------------
    def add(self, method: str | None, path: str, action: Action, *,
            times: int | None = 1, skip: int = 0) -> Rule:
        """Add a rule; `path` is a regex searched in the request target (path + query)."""
        rule = Rule(method.upper() if method else None, re.compile(path), action, times, skip)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        """Forget all rules and recorded requests."""
        with self._lock:
            self._rules.clear()
            self._requests.clear()

    @property
    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_matching(self, method: str | None = None, path: str = "") -> list[RecordedRequest]:
        pattern = re.compile(path)
        return [
            r for r in self.requests
            if (method is None or r.method == method.upper()) and pattern.search(r.path)
        ]

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals used by the handler ----------------------------------------------------
    def _record(self, rec: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(rec)

    def _pick(self, method: str, target: str) -> Action | None:
        with self._lock:
            for rule in self._rules:
                if rule.exhausted or not rule.matches(method, target):
                    continue
                rule.matched += 1
                if rule.matched <= rule.skip:
                    continue
                rule.applied += 1
                return rule.action
        return None

    def upstream(self, method: str, path: str, headers: dict[str, str] | None = None,
                 body: bytes | None = None) -> tuple[int, list[tuple[str, str]], bytes]:
        """One request straight to the registry (for quirks that answer themselves)."""
        conn = self._connect()
        try:
            conn.request(method, path, body=body, headers={"Host": self.upstream_netloc, **(headers or {})})
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, [(k, self._rewrite_location(v) if k.lower() == "location" else v)
                                 for k, v in resp.getheaders()], data
        finally:
            conn.close()

    def _connect(self) -> http.client.HTTPConnection:
        host, _, port = self.upstream_netloc.rpartition(":")
        if self._upstream_tls:
            return http.client.HTTPSConnection(host, int(port), timeout=self.timeout,
                                               context=self._ssl)
        return http.client.HTTPConnection(host, int(port), timeout=self.timeout)

    def _rewrite_location(self, value: str) -> str:
        for scheme in ("http://", "https://"):
            prefix = scheme + self.upstream_netloc
            if value.startswith(prefix):
                return self.url + value[len(prefix):]
        return value


class _Cut(Exception):
    """The proxy deliberately cut the connection."""


def _make_handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        #: TCP_NODELAY on each client connection: the headers and the body of an answer are
        #: two writes, and with Nagle's algorithm the body waited for the client's delayed ACK
        #: of the headers (40 ms on Linux) on every answer with a small body
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        # every method goes through one path
        def do_GET(self) -> None:  # noqa: N802
            self._handle()

        do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET  # noqa: N815

        # -- request body ---------------------------------------------------------------
        def _body_pieces(self) -> Iterator[bytes]:
            """The client's request body, de-chunked, in pieces."""
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                while True:
                    line = self.rfile.readline(65537)
                    if not line:
                        raise _Cut("client closed inside a chunked body")
                    size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                            pass
                        return
                    left = size
                    while left:
                        piece = self.rfile.read(min(PIECE, left))
                        if not piece:
                            raise _Cut("client closed inside a chunk")
                        left -= len(piece)
                        yield piece
                    self.rfile.readline(3)
            else:
                left = int(self.headers.get("Content-Length") or 0)
                while left:
                    piece = self.rfile.read(min(PIECE, left))
                    if not piece:
                        raise _Cut("client closed inside the body")
                    left -= len(piece)
                    yield piece

        def _cut(self) -> None:
            """Close the client connection abruptly."""
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.wfile.flush()
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

        # -- main -----------------------------------------------------------------------
        def _handle(self) -> None:
            rec = RecordedRequest(
                self.command, self.path, {k.lower(): v for k, v in self.headers.items()}
            )
            proxy._record(rec)
            action = None
            for quirk in proxy.quirks:  # the registry's own behaviour first (a 401, a 413)
                action = quirk.on_request(proxy, rec)
                if action is not None:
                    break
            if action is None:
                action = proxy._pick(self.command, self.path)
            rec.action = action.name if action else None
            try:
                if isinstance(action, Serve):
                    body = b"".join(self._body_pieces())
                    rec.request_bytes = len(body)
                    self._answer(rec, action.handler(proxy, rec, body), read=False)
                    return
                if isinstance(action, CapBody):
                    self._capped(rec, action)
                    return
                if isinstance(action, Status):
                    self._answer(rec, action)
                    return
                if isinstance(action, Delay):
                    if action.release is None:
                        time.sleep(action.seconds)
                    else:
                        action.release.wait(action.seconds)
                if isinstance(action, Hold) and action.after is None and not action.answered:
                    action.release.wait()
                    raise _Cut("held, then cut before the upstream saw it")
                self._forward(rec, action)
            except _Cut:
                self._cut()
            except (OSError, http.client.HTTPException):
                self._cut()

        def _capped(self, rec: RecordedRequest, action: CapBody) -> None:
            pieces = []
            for piece in self._body_pieces():
                rec.request_bytes += len(piece)
                if rec.request_bytes <= action.limit:
                    pieces.append(piece)
            if rec.request_bytes > action.limit:
                self._answer(rec, Status(action.code, None, action.body,
                                         (("Content-Type", "text/html"),)), read=False)
                return
            conn = proxy._connect()
            try:
                self._send_buffered(conn, rec, BufferRequest(), True, b"".join(pieces))
                resp = conn.getresponse()
                rec.answered = time.time()
                self._relay(resp, rec, None)
            finally:
                conn.close()

        def _answer(self, rec: RecordedRequest, action: Status, read: bool = True) -> None:
            for piece in self._body_pieces() if read else ():
                rec.request_bytes += len(piece)
            self.send_response_only(action.code)
            if not any(k.lower() == "content-type" for k, _ in action.headers):
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(action.body)))
            self.send_header("Docker-Distribution-Api-Version", "registry/2.0")
            if action.retry_after is not None:
                ra = action.retry_after
                self.send_header("Retry-After", str(int(ra)) if ra == int(ra) else str(ra))
            for k, v in action.headers:
                self.send_header(k, v)
            rec.status = action.code  # recorded before the client can see the answer and move on
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(action.body)
                rec.response_bytes = len(action.body)

        def _forward(self, rec: RecordedRequest, action: Action | None) -> None:
            conn = proxy._connect()
            try:
                self._send_upstream(conn, rec, action)
                resp = conn.getresponse()
                rec.answered = time.time()
                if isinstance(action, Hold):  # done upstream; never heard
                    action.release.wait()
                    raise _Cut("held after the upstream answered")
                self._relay(resp, rec, action)
            finally:
                conn.close()

        def _send_upstream(self, conn: http.client.HTTPConnection, rec: RecordedRequest,
                           action: Action | None) -> None:
            chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
            has_body = chunked or "Content-Length" in self.headers
            if isinstance(action, BufferRequest):
                self._send_buffered(conn, rec, action, has_body)
                return
            path = action.path if isinstance(action, Reroute) else self.path
            conn.putrequest(self.command, path, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", proxy.upstream_netloc)
            for name, value in self.headers.items():
                if name.lower() in HOP_BY_HOP or name.lower() == "host":
                    continue
                if name.lower() == "range" and isinstance(action, IgnoreRange):
                    continue
                conn.putheader(name, value)
            if chunked:
                conn.putheader("Transfer-Encoding", "chunked")
            conn.endheaders()
            if not has_body:
                return
            limit = action.after if isinstance(action, (DropRequest, Hold)) else None
            for piece in self._body_pieces():
                if limit is not None and rec.request_bytes + len(piece) >= limit:
                    piece = piece[: limit - rec.request_bytes]
                    rec.request_bytes += len(piece)
                    if piece and action.forward:  # type: ignore[union-attr]
                        conn.send(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                    if isinstance(action, Hold):
                        action.release.wait()
                    time.sleep(0.05)  # let the registry consume what it got before the cut
                    raise _Cut("request dropped by rule")
                rec.request_bytes += len(piece)
                conn.send(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                _pace(None if isinstance(action, Stall) else action, len(piece), rec.request_bytes)  # (a response's)
            if limit is not None:
                raise _Cut("request dropped by rule (body shorter than the limit)")
            if chunked:
                conn.send(b"0\r\n\r\n")

        def _send_buffered(self, conn: http.client.HTTPConnection, rec: RecordedRequest,
                           action: BufferRequest, has_body: bool, read: bytes | None = None) -> None:
            """The whole body first (a cut raises _Cut: nothing was forwarded), then the
            request with a Content-Length."""
            pieces = [] if read is None else [read]
            if has_body and read is None:
                for piece in self._body_pieces():
                    rec.request_bytes += len(piece)
                    pieces.append(piece)
                    _pace(action, len(piece), rec.request_bytes)
            body = b"".join(pieces)
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", proxy.upstream_netloc)
            for name, value in self.headers.items():
                if name.lower() in HOP_BY_HOP or name.lower() in ("host", "content-length"):
                    continue
                conn.putheader(name, value)
            if has_body:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body if has_body else None)

        def _relay(self, resp: http.client.HTTPResponse, rec: RecordedRequest,
                   action: Action | None) -> None:
            rec.upstream_status = resp.status
            if isinstance(action, LoseResponse):
                raise _Cut("response lost by rule")
            no_body = self.command == "HEAD" or resp.status in (204, 304) or resp.status < 200
            length_header = resp.getheader("Content-Length")
            length = int(length_header) if length_header is not None else None
            chunked_out = not no_body and length is None
            rec.status = resp.status  # recorded before the client can see the answer and move on
            self.send_response_only(resp.status, resp.reason)
            out = resp.getheaders()
            for quirk in proxy.quirks:
                out = quirk.on_response(rec, resp.status, out)
            for name, value in out:
                lname = name.lower()
                if lname in HOP_BY_HOP:
                    continue
                if lname == "location":
                    rec.upstream_location = value
                    value = proxy._rewrite_location(value)
                self.send_header(name, value)
            if chunked_out:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if no_body:
                if isinstance(action, (DropResponse, Truncate)):
                    raise _Cut("response cut by rule after the headers")
                return
            stop_at: int | None = None
            if isinstance(action, DropResponse):
                stop_at = action.after
            elif isinstance(action, Truncate):
                stop_at = max(0, (length or 0) - action.missing) if length is not None else 0
            sent = 0
            flip = action.offset if isinstance(action, Corrupt) else \
                action.flip if isinstance(action, IgnoreRange) else None
            if isinstance(action, CorruptAt):  # where the blob's byte is in this body, if it is
                m = re.match(r"bytes (\d+)-", resp.getheader("Content-Range") or "") if resp.status == 206 else None
                flip = action.offset - (int(m.group(1)) if m else 0)
            while True:
                piece = resp.read(PIECE)
                if not piece:
                    break
                if flip is not None and sent <= flip < sent + len(piece):
                    i = flip - sent
                    piece = piece[:i] + bytes([piece[i] ^ 0xFF]) + piece[i + 1:]
                if stop_at is not None and sent + len(piece) >= stop_at:
                    piece = piece[: stop_at - sent]
                    sent = self._counted_write(rec, sent, piece, chunked_out)
                    raise _Cut("response cut by rule")
                sent = self._counted_write(rec, sent, piece, chunked_out)
                rec.last_sent = time.time()
                _pace(action, len(piece), sent)
            if stop_at is not None:  # body ended before the cut point: still cut
                raise _Cut("response cut by rule (body shorter than the limit)")
            if chunked_out:
                self.wfile.write(b"0\r\n\r\n")

        def _counted_write(self, rec: RecordedRequest, sent: int, piece: bytes, chunked: bool) -> int:
            """Write ``piece`` with ``rec.response_bytes`` counting it first: a client may read the
            last piece and a test look at the count before this thread runs again."""
            rec.response_bytes = sent + len(piece)
            try:
                self._write(piece, chunked)
            except OSError:
                rec.response_bytes = sent  # it did not go
                raise
            return sent + len(piece)

        def _write(self, piece: bytes, chunked: bool) -> None:
            if not piece:
                return
            if chunked:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            else:
                self.wfile.write(piece)

    return Handler
