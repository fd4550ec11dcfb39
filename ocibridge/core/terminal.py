"""Text for a terminal from untrusted names.

Tags, file paths, annotations and error messages quoted from artifacts and registries reach
stdout/stderr. A raw ESC, CR or bidi override there could rewrite what the user sees (hide a
line, move the cursor, reorder characters), so every line ocibridge prints for people goes
through :func:`printable`: control characters other than newline and tab become visible escapes.
A name or a message meant as one line goes through :func:`one_line`, which escapes newlines too:
a layer title or a server's error text holding a newline could otherwise print a line of its own
("ocibridge: error: ...\\npulled ... into DIR").

Sizes for people both ways: :func:`human_size` writes one, :func:`parse_bytes` reads what a
person wrote (``64M``: a flag's value, a job file's).
"""

from __future__ import annotations

import re

# C0 controls but \t and \n, DEL, C1 controls, the Unicode bidi embeddings/overrides/isolates, and
# lone surrogates: a path's byte that is no UTF-8 (Python's surrogateescape), which a strict UTF-8
# stdout refuses to write (escaped as Python writes it on stderr: \udcff)
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every character that could drive the terminal shown as an escape."""
    return _UNSAFE.sub(_escape, text)


def one_line(text: str) -> str:
    """``text`` as :func:`printable` shows it, with newlines escaped as well (``\\n``)."""
    return printable(text).replace("\n", "\\n")


def human_size(n: int) -> str:
    """``n`` bytes for people: 512 B, 1.5 KiB, 3.0 GiB."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def parse_bytes(text: str) -> int:
    """``500K``, ``20M``, ``1G`` (powers of 1024, as curl reads them) or plain bytes: a rate
    (per second) or a size."""
    value = text.strip().upper().removesuffix("B").removesuffix("/S")
    scale = 1
    for suffix, factor in (("K", 1024), ("M", 1024**2), ("G", 1024**3)):
        if value.endswith(suffix):
            value, scale = value[:-1], factor
            break
    try:
        rate = int(float(value) * scale)
    except (ValueError, OverflowError):  # OverflowError: '1e999', 'inf' (no byte count either)
        raise ValueError(f"{text!r} is not a byte count (use e.g. 500K, 20M, 1G)") from None
    if rate < 1:
        raise ValueError(f"{text!r} is under one byte")
    return rate
