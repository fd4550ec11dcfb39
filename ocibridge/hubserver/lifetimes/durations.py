"""A lifetime as the command line writes it: a number and a unit (``30d``, ``12h``, ``90m``,
``45s``; a bare number is seconds)."""

from __future__ import annotations

import re

from ocibridge.errors import UsageError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw]?)")


def parse_duration(text: str, flag: str = "--upstream-keep") -> float:
    """Seconds of ``text``; one usage line when it is no duration or not above zero."""
    match = _DURATION.fullmatch(text.strip().lower())
    seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"] if match else 0.0
    if not seconds > 0:
        raise UsageError(f"{flag} {text}: expected a duration above zero, a number and a unit: 30d, 12h, 90m, 45s")
    return seconds


def shown(seconds: float) -> str:
    """``seconds`` in the largest unit that divides it (``30d``, ``90m``), for messages."""
    for unit, size in sorted(_UNITS.items(), key=lambda item: -item[1]):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
