"""The registry client's transport stack: each concern one ``httpx.BaseTransport`` wrapping the next.

As go-containerregistry stacks its round-trippers, a request goes down through::

    retry -> HTTP fallback -> redirects -> auth -> counting -> request gate
          -> caller's layers (RegistryOptions.layers) -> request log -> byte budget -> network

(retry.py, fallback.py, redirects.py, auth.py, this module, ratelimit.py, tracked.py). Token
requests take the part from the request gate down. What a layer needs to know about one
request (its scopes, whether it may be retried) rides in ``request.extensions`` as a typed
:class:`RequestPolicy`, so no layer needs the client, and each can be tested alone against a
real registry.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import httpx

from ocibridge.stores.registry.bodies import read_prefix
from ocibridge.stores.registry.options import RequestGate
from ocibridge.stores.registry.stats import TransferStats

#: The ``request.extensions`` key holding a request's :class:`RequestPolicy`.
POLICY_KEY = "ocibridge.policy"
#: Where every request that goes over the wire is logged (``--debug`` shows it).
REQUEST_LOG = logging.getLogger("ocibridge.http")


@dataclass(frozen=True)
class RequestPolicy:
    """How the layers treat one request.

    ``scopes``: the token scopes it needs (auth). ``retry``: whether failures and 5xx answers
    are retried (retry). ``replayable``: whether its body can be sent again (auth answers a
    401 by resending only then). ``on_base``: its URL was built from the client's base URL, so
    the HTTPS->HTTP fallback may rewrite it.
    """

    scopes: tuple[str, ...] = ()
    retry: bool = True
    replayable: bool = True
    on_base: bool = True


DEFAULT_POLICY = RequestPolicy()


def policy_of(request: httpx.Request) -> RequestPolicy:
    """The request's policy; a request built without one gets the defaults."""
    policy = request.extensions.get(POLICY_KEY)
    return policy if isinstance(policy, RequestPolicy) else DEFAULT_POLICY


def with_policy(extensions: dict[str, object], policy: RequestPolicy) -> dict[str, object]:
    return {**extensions, POLICY_KEY: policy}


class Origin:
    """The registry's base URL, shared by the client and the layers that compare against it
    (auth sends credentials only there; the fallback switches it to plain HTTP once)."""

    def __init__(self, base: str):
        self._base = base
        self._lock = threading.Lock()

    @property
    def base(self) -> str:
        return self._base

    def same(self, url: httpx.URL | str) -> bool:
        """Whether ``url`` is on the registry's own scheme, host and port."""
        try:
            a = httpx.URL(str(url))
        except (httpx.InvalidURL, ValueError):
            return False  # a URL that does not parse is no one's origin
        b = httpx.URL(self._base)
        return (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)

    def downgrade(self) -> None:
        """Speak plain HTTP to the registry from now on."""
        with self._lock:
            if self._base.startswith("https://"):
                self._base = "http://" + self._base[len("https://"):]


class Layer(httpx.BaseTransport):
    """A transport that adds one concern and hands the request to ``inner``."""

    def __init__(self, inner: httpx.BaseTransport):
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


class Shared(Layer):
    """A view of a transport that another stack owns: closing the view leaves it open."""

    def close(self) -> None:
        pass


class CountingTransport(Layer):
    """Counts every request sent (each attempt, each redirect hop) in ``stats.requests``."""

    def __init__(self, inner: httpx.BaseTransport, stats: TransferStats):
        super().__init__(inner)
        self.stats = stats

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.stats.add(requests=1)
        return self.inner.handle_request(request)


class GateTransport(Layer):
    """Every request waits for the gate first (the mirror's requests-per-second bucket)."""

    def __init__(self, inner: httpx.BaseTransport, gate: RequestGate):
        super().__init__(inner)
        self.gate = gate

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.gate.acquire()
        return self.inner.handle_request(request)


class LoggingTransport(Layer):
    """One log line per answer, as httpx's own: ``HTTP Request: GET URL "HTTP/1.1 200 OK"``.
    Headers are never logged; debuglog.py redacts secrets a URL may carry."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if REQUEST_LOG.isEnabledFor(logging.INFO):
            REQUEST_LOG.info('HTTP Request: %s %s "%s %d %s"', request.method, request.url,
                             response.http_version, response.status_code, response.reason_phrase)
        return response


def discard(response: httpx.Response) -> None:
    """Drop an answer a layer does not pass on, reading no more than a bounded prefix of it."""
    if not response.is_closed:
        read_prefix(response)
