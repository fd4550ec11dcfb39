"""Which addresses the proxy's session may connect to: a redirect's or a Xet answer's URL is the
upstream's word, so a hostile upstream could point serve at the cloud's metadata address, a
loopback admin port or a private range (a blind request from inside the cluster). Every address
is of one kind (:func:`kind_of`); serve connects to public addresses, and to the kinds the
upstream's own host resolves to (an upstream on loopback or a private range: tests, an internal
mirror), never to another kind. The check is in the connection pool's network backend: the host is
resolved once, every address it resolves to checked, and the socket connected to a checked address
(a name that changes its answer between check and connect gains nothing). TLS still verifies the
name asked for. Through an HTTP proxy the environment names, the proxy is the operator's and
trusted as it is; the host each request names is checked before the proxy is asked
(:mod:`.proxiedcheck`). serve's upstream session and a mirror's ``hf://`` client obey one rule."""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ocibridge.errors import OcibridgeError

if TYPE_CHECKING:
    import httpcore

log = logging.getLogger("ocibridge.addresses")
PUBLIC = "public"
#: each kind of address but public, tested in this order (a loopback address is private to Python too)
_KINDS = (("loopback", "is_loopback"), ("link-local", "is_link_local"), ("unspecified", "is_unspecified"),
          ("multicast", "is_multicast"), ("private", "is_private"), ("reserved", "is_reserved"))


class AddressRefused(OcibridgeError):
    """A URL the upstream pointed at resolves to an address of a kind not connected to."""


def kind_of(text: str) -> str:
    """The kind of the address ``text``: ``public``, or ``loopback``, ``link-local``,
    ``unspecified``, ``multicast``, ``private``, ``reserved`` (any other address not global)."""
    address = ipaddress.ip_address(text.partition("%")[0])  # an IPv6 zone is not the address
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for kind, test in _KINDS:
        if getattr(address, test):
            return kind
    return PUBLIC if address.is_global else "reserved"


def resolved(host: str, port: int, failed: type[Exception] | None = None) -> list[str]:
    """Every address ``host`` resolves to (once), in the resolver's order; ``failed``: the error
    a name that does not resolve raises (httpcore's ``ConnectError`` unless said)."""
    if failed is None:
        import httpcore

        failed = httpcore.ConnectError
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise failed(f"{host}: {e}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in found))


class AddressRule:
    """The kinds of address connected to for the upstream at ``url``: public, and those of its
    own host (resolved at the first connection); ``kinds``: fixed instead (a test's upstream);
    ``refusal``: the error a refusal raises; ``role``: what ``url`` is called in it; ``logged``: each
    refusal logged too (serve's log; a mirror says it in its summary line only)."""

    def __init__(self, url: str, kinds: Iterable[str] | None = None, *,
                 refusal: type[AddressRefused] = AddressRefused, role: str = "upstream", logged: bool = True):
        self.url, self.refusal, self.role, self.logged = url, refusal, role, logged
        self._kinds = frozenset(kinds) | {PUBLIC} if kinds is not None else None
        self._lock = threading.Lock()

    def allowed(self) -> frozenset[str]:
        with self._lock:
            if self._kinds is None:
                parts = urlsplit(self.url)
                port = parts.port or (443 if parts.scheme == "https" else 80)
                self._kinds = frozenset(kind_of(a) for a in resolved(parts.hostname or "", port)) | {PUBLIC}
            return self._kinds

    def check(self, host: str, addresses: list[str]) -> None:
        """:class:`AddressRefused` when any address of ``host`` is of a kind not allowed."""
        allowed = self.allowed()
        for address in addresses:
            kind = kind_of(address)
            if kind not in allowed:
                if self.logged:
                    log.warning("%s: not connected to %s: it resolves to %s, a %s address (the address rule: the %s "
                                "%s is %s)", self.role, host, address, kind, self.role, self.url,
                                " or ".join(sorted(allowed)))
                raise self.refusal(f"{host} resolves to {address}, a {kind} address: not connected (the address "
                                   f"rule: a URL the {self.role} {self.url} pointed at; it may point at "
                                   f"{' or '.join(sorted(allowed))} addresses only)")


class CheckedBackend:
    """httpcore's network backend with :class:`AddressRule` before each TCP connection: the socket
    is connected to an address the rule checked, never to the name resolved again."""

    def __init__(self, inner: httpcore.NetworkBackend, rule: AddressRule, core: Any = None):
        self.inner, self.rule = inner, rule
        if core is None:  # the httpcore the pool is of (httpcore2 under huggingface_hub's httpx2)
            import httpcore as core
        self.core = core

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        addresses = resolved(host, port, self.core.ConnectError)
        self.rule.check(host, addresses)
        failed: Exception = self.core.ConnectError(f"{host}: no address")
        for address in addresses:
            try:
                return self.inner.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                              socket_options=socket_options)
            except (self.core.ConnectError, self.core.ConnectTimeout) as e:
                failed = e
        raise failed

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return self.inner.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)
