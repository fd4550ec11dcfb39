"""A client's transports under the address rule (:mod:`.addressrule`), for httpx or for the httpx
huggingface_hub sends with (httpx2: "a flavour", the httpx module and its httpcore): a direct pool
whose backend checks each connection, and a transport per proxy the environment names
(``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, less ``NO_PROXY``, read as httpx reads them).

A client given its own transport reads no proxy from the environment, so without these an
operator's proxy would be passed by (the upstream unreachable behind it). The proxy is the
operator's setting: connected to as it is, whatever its address. The host each request asks it for
is resolved here and checked by the rule before the proxy is asked (the proxy resolves it again:
a name that answers otherwise between the two is the proxy's to refuse); a host that does not
resolve here is refused, unless ``$OCIBRIDGE_PROXY_RESOLVES=1`` lets the proxy resolve it."""

from __future__ import annotations

import ipaddress
import os
import urllib.request
from typing import Any

from ocibridge.core import environment
from ocibridge.core.addressrule import AddressRule, CheckedBackend, resolved
from ocibridge.errors import OcibridgeError

PORTS = {"http": 80, "https": 443}


def environment_proxies() -> dict[str, str | None]:
    """httpx's mount patterns for the environment's proxies: ``SCHEME://`` -> the proxy's URL, and
    each ``NO_PROXY`` entry -> None (connected directly)."""
    said = urllib.request.getproxies_environment()
    mounts: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if said.get(scheme):
            mounts[f"{scheme}://"] = said[scheme] if "://" in said[scheme] else f"http://{said[scheme]}"
    for entry in (e.strip() for e in said.get("no", "").split(",")):
        if entry == "*":
            return {}
        if not entry:
            continue
        if "://" in entry:
            mounts[entry] = None
            continue
        try:
            address = ipaddress.ip_address(entry)
        except ValueError:
            mounts["all://localhost" if entry == "localhost" else f"all://*{entry}"] = None
        else:
            mounts[f"all://[{entry}]" if address.version == 6 else f"all://{entry}"] = None
    return mounts


def proxy_resolves() -> bool:
    """Whether a name this machine cannot resolve is asked of the proxy all the same."""
    return os.environ.get(environment.PROXY_RESOLVES, "") == "1"


class CheckedTarget:
    """A proxy's transport behind the rule's check of the host each request names."""

    def __init__(self, inner: Any, rule: AddressRule, proxy: str):
        self.inner, self.rule, self.proxy = inner, rule, proxy

    def handle_request(self, request: Any) -> Any:
        host, scheme = request.url.host, request.url.scheme
        try:
            addresses = resolved(host, request.url.port or PORTS.get(scheme, 80), OSError)
        except OSError:
            if not proxy_resolves():
                raise self.rule.refusal(
                    f"{host} does not resolve here, so the address rule cannot check it: not asked through the "
                    f"proxy {_shown(self.proxy)} (a URL the {self.rule.role} {self.rule.url} pointed at; "
                    f"{environment.PROXY_RESOLVES}=1 lets the proxy resolve it)") from None
        else:
            self.rule.check(host, addresses)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> CheckedTarget:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.inner.__exit__(*exc)


def _shown(proxy: str) -> str:
    """The proxy's URL without its credentials."""
    from urllib.parse import urlsplit

    parts = urlsplit(proxy)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


def checked_client_options(rule: AddressRule, flavour: Any = None, core: Any = None,
                           **options: Any) -> dict[str, Any]:
    """``transport`` and ``mounts`` of a ``flavour.Client`` (httpx unless said; ``core``: its
    httpcore) under ``rule``; ``options``: the transports' own (``verify``)."""
    from ocibridge.core.httpx_wall import wrap_backend

    if flavour is None:
        import httpcore as core
        import httpx as flavour
    direct = flavour.HTTPTransport(**options)
    wrap_backend(direct, lambda inner: CheckedBackend(inner, rule, core), core)
    mounts: dict[str, Any] = {}
    for pattern, proxy in environment_proxies().items():
        if proxy is None:
            mounts[pattern] = None
            continue
        try:
            mounts[pattern] = CheckedTarget(flavour.HTTPTransport(proxy=proxy, **options), rule, proxy)
        except (ImportError, ValueError) as e:  # a SOCKS proxy without socksio, a scheme httpx has no proxy of
            raise OcibridgeError(f"the environment's proxy {_shown(proxy)} cannot be used: {e}") from None
    return {"transport": direct, "mounts": mounts}
