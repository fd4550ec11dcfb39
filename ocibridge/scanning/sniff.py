"""What the first bytes of a file say it is, where more than one module must tell: a pickle (any
protocol) and a compressed stream."""

from __future__ import annotations

import re

#: a pickle of protocol 2 to 5 starts with PROTO and its number
_PICKLE_PROTO = re.compile(rb"\x80[\x00-\x05]")
#: one of protocol 0 and 1 starts with a mark, an empty container, or a global (``cos\nsystem\n``:
#: two dotted names; a text whose first line is a word is no pickle)
_PICKLE_OLD = re.compile(rb"[(\]})]|[ci][A-Za-z_][\w.]*\n[A-Za-z_][\w.]*\n")


def looks_like_pickle(head: bytes) -> bool:
    return bool(_PICKLE_PROTO.match(head) or _PICKLE_OLD.match(head))


def compression_of(head: bytes) -> str | None:
    """The stream compression ``head`` starts with (gzip, bz2, xz, zlib), else None."""
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"BZh") and head[3:4].isdigit():
        return "bz2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if len(head) >= 2 and head[0] == 0x78 and head[1] in (0x01, 0x5E, 0x9C, 0xDA):
        return "zlib"  # (each of these second bytes makes the header's check: a multiple of 31)
    return None
