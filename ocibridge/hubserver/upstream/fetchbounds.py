"""Bounds on the upstream fetches clients start: at most ``--upstream-max-fetches`` commits fetched
at once, and at most ``--upstream-max-fetches-per-client`` of them started by one client (its bearer
token, else its address: serve's ``--trust-forwarded`` says which address that is). A read that
would start one more is the Hub's 503 with ``Retry-After`` (a read that joins a fetch under way, or
finds its commit landed, starts none), so one client asking for many unknown repositories at once
cannot start as many downloads, nor grow serve's threads with them (each fetch is one thread and
``concurrency`` file workers)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from contextvars import ContextVar

from starlette.types import ASGIApp, Receive, Scope, Send

from ocibridge.hubserver.upstream.errors import UpstreamDown
from ocibridge.hubserver.upstream.settings import MAX_FETCHES, MAX_FETCHES_PER_CLIENT

_client: ContextVar[str] = ContextVar("ocibridge_fetching_client", default="")


class FetchesBusy(UpstreamDown):
    """No fetch may start now: the bound is reached; asked again after ``retry_after``."""

    retry_after = 5


def requesting_client() -> str:
    """The client of the request being answered (a digest of its token, or its address)."""
    return _client.get()


class FetchClient:
    """ASGI middleware: each HTTP request's client noted for :func:`requesting_client`;
    ``known``: whether a bearer token is one of serve's (its token file's)."""

    def __init__(self, app: ASGIApp, known: Callable[[str], bool] = lambda token: False):
        self.app, self.known = app, known

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            _client.set(client_of(scope, self.known))
        await self.app(scope, receive, send)


def client_of(scope: Scope, known: Callable[[str], bool]) -> str:
    """A token serve knows (read as :func:`..answers.bearer` reads it), else the peer's address:
    an ``Authorization`` serve does not take (another scheme, a token an open server ignores,
    the same token spelled otherwise) names no client of its own, so a client cannot be a new one
    at each request by changing it."""
    for name, value in scope.get("headers") or ():
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            token = token.strip()
            if scheme.lower() == "bearer" and token and known(token):
                return "token:" + hashlib.sha256(token.encode("latin-1")).hexdigest()[:16]
            break
    peer = scope.get("client")
    return f"address:{peer[0]}" if peer else "address:?"


class FetchBounds:
    """Counts the fetches under way, over all and by client."""

    def __init__(self, most: int = MAX_FETCHES, per_client: int = MAX_FETCHES_PER_CLIENT):
        self.most, self.per_client = most, per_client
        self._lock = threading.Lock()
        self._running = 0
        self._by_client: dict[str, int] = {}

    def admit(self, client: str, what: str) -> Callable[[], None]:
        """One fetch more for ``client`` (``what``: the commit, for the refusal), or
        :class:`FetchesBusy`; what ends it (called once, when the fetch ended)."""
        with self._lock:
            if self._running >= self.most:
                raise FetchesBusy(f"{what}: not fetched now: {self._running} upstream fetches are under way, "
                                  f"the most this serve runs at once (--upstream-max-fetches); ask again later")
            if self._by_client.get(client, 0) >= self.per_client:
                raise FetchesBusy(f"{what}: not fetched now: this client has {self.per_client} upstream fetches "
                                  "under way, the most one client may start (--upstream-max-fetches-per-client); "
                                  "ask again later")
            self._running += 1
            self._by_client[client] = self._by_client.get(client, 0) + 1
        ended = threading.Event()

        def end() -> None:
            if ended.is_set():
                return
            ended.set()
            with self._lock:
                self._running -= 1
                left = self._by_client.get(client, 1) - 1
                if left > 0:
                    self._by_client[client] = left
                else:
                    self._by_client.pop(client, None)

        return end
