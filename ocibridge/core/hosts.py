"""The one reading of a registry's ``host[:port]``: its host part, and whether it is loopback.

Loopback decides plain HTTP by default (Docker's convention) and the warning that a name means
the pod itself inside Kubernetes, so it is decided here only, strictly: ``localhost`` (any case,
one trailing dot allowed) or an IP literal in 127.0.0.0/8, ``::1``, or an IPv4-mapped IPv6 form
of those (``::ffff:127.0.0.1``: it reaches the same socket). A DNS name is never loopback by its
spelling: ``127.attacker.example``, ``127.0.0.1.nip.io`` and ``localhost.evil.com`` resolve
wherever their owner says, and ``registry.localhost`` wherever the resolver says. Forms that
``inet_aton`` accepts but ``ipaddress`` does not (``0x7f.0.0.1``, ``127.1``) are names here,
so they get HTTPS: the safe side. Standard library only (the warm ``path`` start-up uses it).
"""

from __future__ import annotations


def split_host_port(text: str) -> tuple[str, str | None]:
    """(host, port or None) of ``host[:port]``, ``[v6]:port``, ``[v6]`` or a bare IPv6 address."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else None
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return host, port
    return text, None  # a name, or a bare IPv6 address (``::1``)


def host_of(text: str) -> str:
    """The host part of ``host[:port]`` (an IPv6 literal without its brackets)."""
    return split_host_port(text)[0]


def is_loopback(text: str) -> bool:
    """Whether ``host[:port]`` names this machine, by the rule in the module's docstring."""
    host = host_of(text)
    if host.lower() in ("localhost", "localhost."):
        return True
    if not host or not (host[0].isdigit() or ":" in host):
        return False  # a name (ipaddress would say so too, at ~1 ms of import)
    import ipaddress

    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
