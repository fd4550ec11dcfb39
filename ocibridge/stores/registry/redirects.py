"""The redirect layer: GET and HEAD follow 3xx themselves, each hop a request of its own.

httpx is told not to follow, so that every hop passes the auth layer below, which puts the
Authorization header only on requests to the registry's own origin: blob GETs often redirect to
a storage backend on another host, which must never see it.
"""

from __future__ import annotations

from urllib.parse import urljoin

import httpx

from ocibridge.errors import RegistryError
from ocibridge.stores.registry.transport import Layer, discard

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5
_NOT_COPIED = frozenset({b"host", b"authorization", b"cookie"})


class RedirectTransport(Layer):
    """Follows at most :data:`MAX_REDIRECTS` redirects of a GET or HEAD."""

    def __init__(self, inner: httpx.BaseTransport, host: str):
        super().__init__(inner)
        self.host = host

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        method = request.method
        url = str(request.url)
        for _ in range(MAX_REDIRECTS + 1):
            response = self.inner.handle_request(request)
            if response.status_code not in REDIRECT_STATUSES or method not in ("GET", "HEAD"):
                return response
            location = response.headers.get("location")
            discard(response)
            if not location:
                raise RegistryError(f"registry {self.host}: redirect without a Location", 502)
            url = urljoin(str(request.url), location)
            request = _next_hop(request, url)
        raise RegistryError(f"registry {self.host}: too many redirects for {method} {url}")


def _next_hop(request: httpx.Request, url: str) -> httpx.Request:
    """The same GET/HEAD to ``url``: the caller's headers, none of the credentials (the
    Location carries its own query)."""
    headers = [(k, v) for k, v in request.headers.raw if k.lower() not in _NOT_COPIED]
    return httpx.Request(request.method, url, headers=headers, extensions=request.extensions)
