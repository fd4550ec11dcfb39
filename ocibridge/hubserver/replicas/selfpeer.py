"""A ``--peer`` (or ``--writer``) that is this very serve, refused at start.

A standby sends a write to the peer its lease record names; a peer URL that leads back to
itself sent it to itself, which sent it on again: descriptors and memory grew without end
(19 -> 14,000 descriptors, 433 MiB) while the client waited. Two rules end it:

- here, at start: a peer URL equal to this serve's ``--public-url``, or whose host is one of
  this machine's own addresses at the port serve listens on (with its scheme), is this serve:
  one usage line, and serve does not start;
- at run time, for an address that reaches this serve in a way no start check sees (a load
  balancer in front of several serves): a forwarded write is never forwarded again
  (:data:`.forward.FORWARDED`).

A name that does not resolve yet is not this serve (peers start in any order).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from ocibridge.errors import UsageError

WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def refuse_self(urls: Iterable[str], flag: str, *, public_url: str | None, scheme: str, host: str,
                port: int) -> None:
    """A :class:`UsageError` naming the first of ``urls`` (given with ``flag``) that is this serve,
    listening at ``host:port`` over ``scheme`` (``public_url``: where clients reach it)."""
    for url in urls:
        if _is_this_serve(url, public_url, scheme, host, port):
            raise UsageError(f"{flag} {url}: that is this serve's own address: it would send writes to itself; "
                             f"name the other serves only")


def _is_this_serve(url: str, public_url: str | None, scheme: str, host: str, port: int) -> bool:
    if public_url and _same_url(url, public_url):
        return True
    parts = urlsplit(url)
    try:
        their_port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    if parts.scheme != scheme or their_port != port or not parts.hostname:
        return False
    theirs = _addresses(parts.hostname)
    if host in WILDCARDS:
        return any(_is_local(address) for address in theirs)
    return bool(theirs & _addresses(host))


def _same_url(a: str, b: str) -> bool:
    left, right = urlsplit(a.rstrip("/")), urlsplit(b.rstrip("/"))
    return (left.scheme, left.netloc.lower(), left.path) == (right.scheme, right.netloc.lower(), right.path)


def _addresses(host: str) -> set[str]:
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)}
    except (socket.gaierror, UnicodeError):
        return set()


def _is_local(address: str) -> bool:
    """Whether ``address`` is one of this machine's own (a socket can be bound to it)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with contextlib.suppress(OSError), socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((address, 0))
        return True
    return False
