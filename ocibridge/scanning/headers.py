"""Tensor files whose danger is in their header: a safetensors or GGUF header that does not
parse, or names bytes outside the file, sends a reader past its end (a crash at best). Only the
header is read: a 1 GiB safetensors costs its first bytes, never its tensors."""

from __future__ import annotations

import struct
from collections.abc import Callable

from ocibridge.errors import OcibridgeError
from ocibridge.lazyread.tensorfile import RangeReadable
from ocibridge.scanning.report import Finding

GGUF_MAGIC = b"GGUF"


def looks_like_safetensors(head: bytes, size: int) -> bool:
    """An 8-byte header length that fits the file, then a JSON object."""
    if len(head) < 9 or size < 9:
        return False
    (length,) = struct.unpack("<Q", head[:8])
    return 2 <= length <= size - 8 and head[8:9] == b"{"


def safetensors_findings(path: str, content: RangeReadable) -> list[Finding]:
    from ocibridge.lazyread.safetensors import read_header

    return _header_holds(path, "safetensors", lambda: read_header(content, path))


def gguf_findings(path: str, content: RangeReadable) -> list[Finding]:
    from ocibridge.lazyread.gguf import RemoteGGUF

    return _header_holds(path, "GGUF", lambda: RemoteGGUF(content, path))


def _header_holds(path: str, what: str, read: Callable[[], object]) -> list[Finding]:
    """No finding when ``read`` parses the header; else one saying why it does not hold."""
    try:
        read()
    except OcibridgeError as e:
        return [Finding(path, "high", f"{what} header does not hold: {_without(str(e), path)}")]
    return []


def _without(message: str, path: str) -> str:
    """The reader's message without the file name it starts with (the finding names the file)."""
    return message[len(path) + 2:] if message.startswith(f"{path}: ") else message
