"""Flag values shared by several commands' parsers, parsed one way (a bad value is exit 2)."""

from __future__ import annotations

from collections.abc import Iterable

from ocibridge.errors import UsageError


def key_values(items: Iterable[str], flag: str = "--annotation") -> dict[str, str]:
    """``KEY=VALUE`` items (``-a/--annotation``) as a dict; a malformed item is a usage error."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag} expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out
