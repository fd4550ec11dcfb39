"""Numbers in HTTP headers, read the way RFC 9110 writes them: ASCII digits only.

``str.isdigit`` also accepts superscripts and other scripts' digits (``"²".isdigit()`` is true,
``int("²")`` raises), and ``\\d`` in a regex matches any Unicode decimal digit: a hostile server
could turn either into a crash or a wrong size. Every header number goes through here.
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"[0-9]{1,19}")  # 19 digits: any size a 64-bit offset can hold


def header_int(value: str | None) -> int | None:
    """The non-negative integer ``value`` spells in ASCII digits, or None."""
    if value is None:
        return None
    value = value.strip()
    return int(value) if _NUMBER.fullmatch(value) else None
