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


class OddHost(ValueError):
    """A registry host written in a spelling that resolvers read another way than it reads."""


def canonical_host(text: str) -> str:
    """The one spelling of ``host[:port]`` that everything compares (the containers policy's
    scopes, the credentials and settings looked up by host): the name in lower case (DNS names
    are case-insensitive), an IP literal in its normal form (``[::1]``), the port as a number
    (``05000`` is ``5000``). Raises :class:`OddHost` for a port outside 1-65535 and for an IPv4
    address written as anything but four decimal numbers without leading zeros
    (``127.000.000.001``, ``0x7f.0.0.1``, ``127.1``, ``2130706433``): the C resolver reads those
    as addresses (leading zeros as octal), so such a name would reach an address that a policy
    written for it does not name."""
    host, port = split_host_port(text)
    bracketed = text.startswith("[") or ":" in host
    if port is not None:
        if not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
            raise OddHost(f"registry {text!r}: the port must be a number from 1 to 65535")
        port = str(int(port))
    if bracketed:
        import ipaddress

        try:
            host = f"[{ipaddress.IPv6Address(host).compressed}]"
        except ValueError:
            raise OddHost(f"registry {text!r}: {host!r} is not an IPv6 address") from None
    else:
        host = host.lower()
        _check_name(text, host)
        if _looks_numeric(host):
            import ipaddress

            try:
                host = str(ipaddress.IPv4Address(host))
            except ValueError:
                raise OddHost(f"registry {text!r}: {host!r} is an IPv4 address in an ambiguous spelling "
                              "(leading zeros, hexadecimal or fewer than four numbers); write it as four "
                              "decimal numbers, such as 127.0.0.1") from None
    return host if port is None else f"{host}:{port}"


def _check_name(text: str, host: str) -> None:
    """Raises :class:`OddHost` for a name no resolver can look up: a label (between dots) empty
    or over 63 characters, or a character IDNA cannot encode. The resolver's own refusal was a
    UnicodeError from deep in the connection, not a line naming the host."""
    if not host:
        return
    if host.isascii():  # the common case, without loading the IDNA codec
        if all(0 < len(label) < 64 for label in host.removesuffix(".").split(".")):
            return
        reason = "a label between dots is empty or over 63 characters"
    else:
        try:
            host.encode("idna")
            return
        except UnicodeError as e:
            reason = " ".join(str(e).split())
    raise OddHost(f"registry {text!r}: not a host name a resolver can look up ({reason})")


def _looks_numeric(host: str) -> bool:
    """Whether every label of ``host`` is a number (decimal, octal or ``0x`` hexadecimal), the
    forms ``inet_aton`` takes for an address; a DNS name has a label that is not."""
    labels = host.rstrip(".").split(".")
    return all(label.isascii() and (label.isdigit() or (label.startswith("0x") and
               all(c in "0123456789abcdef" for c in label[2:]))) for label in labels)
