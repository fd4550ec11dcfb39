"""The HTTPS->HTTP fallback layer, Docker's rule for insecure registries.

With ``--insecure``, a registry that answers a TLS hello with plain HTTP is spoken to in plain
HTTP from then on (HTTPS first, then HTTP), so ``--insecure`` works for a TLS registry and a
plain one alike. Only for requests to the registry's base URL; once per client.
"""

from __future__ import annotations

import ssl

import httpx

from ocibridge.core import interrupt
from ocibridge.stores.registry.transport import Layer, Origin, policy_of


class FallbackTransport(Layer):
    """Retries a request on plain HTTP when TLS to the registry fails with an SSL error."""

    def __init__(self, inner: httpx.BaseTransport, origin: Origin):
        super().__init__(inner)
        self.origin = origin
        self._https = httpx.URL(origin.base)  # the origin as first tried

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        ours = policy_of(request).on_base and self._on_https_origin(request.url)
        if ours and not self.origin.base.startswith("https://"):
            return self.inner.handle_request(_as_http(request))  # another request fell back
        try:
            return self.inner.handle_request(request)
        except httpx.TransportError as e:
            if not ours or not _ssl_failure(e):
                raise
        # out of the except block: a failure of the plain request must not carry the TLS
        # error as its context (unreachable.py reads the chain)
        interrupt.check()
        self.origin.downgrade()
        return self.inner.handle_request(_as_http(request))

    def _on_https_origin(self, url: httpx.URL) -> bool:
        h = self._https
        return h.scheme == "https" and (url.scheme, url.host, url.port) == (h.scheme, h.host, h.port)


def _ssl_failure(error: BaseException) -> bool:
    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, ssl.SSLError):
        cause = cause.__cause__ or cause.__context__
    return cause is not None


def _as_http(request: httpx.Request) -> httpx.Request:
    """The same request on plain HTTP: same host and port, so the same headers (Host too)."""
    return httpx.Request(request.method, request.url.copy_with(scheme="http"),
                         headers=request.headers.raw, stream=request.stream,
                         extensions=request.extensions)
