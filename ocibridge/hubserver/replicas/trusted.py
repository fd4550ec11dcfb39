"""Where the client called, when a reader forwarded its request (:mod:`.forward`).

serve builds the URLs it hands out (LFS upload hrefs, the Xet CAS URL, a commit's URL) from the
address a request came to. A request a reader forwarded came to the writer, so the reader says
in ``X-Forwarded-Host`` and ``X-Forwarded-Proto`` where the client called, and this middleware
makes the request say so (its ``Host`` and scheme) before any route reads it. Those headers are
believed only from the peers serve is told to trust (``--trust-forwarded CIDR``; by default
loopback): from anyone else they would let a client point the URLs serve hands to others at a
host of its choosing.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ocibridge.errors import UsageError

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
#: the peers believed when no --trust-forwarded is given: a reader on the same host
LOOPBACK = ("127.0.0.0/8", "::1/128")


def parse_networks(texts: Iterable[str]) -> tuple[Network, ...]:
    """``--trust-forwarded`` values: addresses or CIDR networks (``10.0.0.0/8``, ``::1``)."""
    networks = []
    for text in texts:
        try:
            networks.append(ipaddress.ip_network(text.strip(), strict=False))
        except ValueError:
            raise UsageError(f"--trust-forwarded {text!r}: expected an address or a network (10.0.0.0/8)") from None
    return tuple(networks)


class TrustedForwarded:
    """ASGI middleware: a request from a trusted peer that carries ``X-Forwarded-Host`` is
    answered as if it came to that host (and ``X-Forwarded-Proto``'s scheme); from any other
    peer those headers are dropped, so no route can read them."""

    def __init__(self, app: ASGIApp, trusted: Sequence[str] = LOOPBACK) -> None:
        self.app = app
        self.trusted = parse_networks(trusted)

    def _trusts(self, scope: Scope) -> bool:
        client = scope.get("client")
        if not client:
            return False
        try:
            address = ipaddress.ip_address(client[0])
        except ValueError:
            return False
        return any(address.version == net.version and address in net for net in self.trusted)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        forwarded = {name: value for name, value in scope["headers"]
                     if name in (b"x-forwarded-host", b"x-forwarded-proto")}
        if forwarded:
            headers = [(name, value) for name, value in scope["headers"]
                       if name not in (b"x-forwarded-host", b"x-forwarded-proto")]
            scope = dict(scope, headers=headers)
            host = forwarded.get(b"x-forwarded-host", b"").strip()
            proto = forwarded.get(b"x-forwarded-proto", b"").strip().lower()
            if self._trusts(scope) and host and _plain_host(host):
                scope["headers"] = [(b"host", host)] + [(n, v) for n, v in headers if n != b"host"]
                if proto in (b"http", b"https"):
                    scope["scheme"] = proto.decode()
        await self.app(scope, receive, send)


def _plain_host(host: bytes) -> bool:
    """A ``HOST[:PORT]`` with nothing a URL would read otherwise (no ``/``, ``@``, space, ...)."""
    return all(c.isalnum() or c in ".-:[]_" for c in host.decode("latin-1"))
