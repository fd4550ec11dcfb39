"""Flag values shared by several commands' parsers, parsed one way (a bad value is exit 2)."""

from __future__ import annotations

import argparse
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


def given(value: str) -> str:
    """A flag's value (its parser's ``type``) refused when empty: ``--identity "$REPO"`` with the
    variable unset would be taken as the flag left out, its default used without a word."""
    if not value:
        raise argparse.ArgumentTypeError("an empty value (an unset shell variable?): leave the flag out for "
                                         "its default")
    return value
