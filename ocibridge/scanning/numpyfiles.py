"""NumPy ``.npy`` files: an array of Python objects is a pickle (``np.load`` needs
``allow_pickle=True`` to read it), so it is flagged, and its pickle is scanned too."""

from __future__ import annotations

import ast
import struct
from typing import Any

from ocibridge.lazyread.tensorfile import RangeReadable
from ocibridge.scanning.content import stream_of
from ocibridge.scanning.library import pickle_findings
from ocibridge.scanning.report import Finding

NPY_MAGIC = b"\x93NUMPY"
MAX_NPY_HEADER = 1 << 20


def npy_findings(path: str, content: RangeReadable, where: str = "") -> list[Finding]:
    head = content.read(0, 12)
    if len(head) < 10:
        return [Finding(path, "high", "a truncated .npy header", where)]
    major = head[6]
    if major == 1:
        (length,), start = struct.unpack("<H", head[8:10]), 10
    elif major in (2, 3) and len(head) >= 12:
        (length,), start = struct.unpack("<I", head[8:12]), 12
    else:
        return [Finding(path, "high", f".npy format version {major} is not one numpy writes", where)]
    if length > MAX_NPY_HEADER:
        return [Finding(path, "high", f".npy header of {length} bytes (numpy writes a few hundred)", where)]
    try:
        header = ast.literal_eval(content.read(start, start + length).decode("latin-1"))
        descr = header["descr"]
    except (ValueError, SyntaxError, TypeError, KeyError, MemoryError, RecursionError):
        return [Finding(path, "high", ".npy header does not parse", where)]
    if not _has_objects(descr):
        return []
    found = [Finding(path, "high", "numpy array of Python objects: loading it unpickles (allow_pickle=True)",
                     where)]
    return found + pickle_findings(path, stream_of(content, start + length), where)


def _has_objects(descr: Any) -> bool:
    """Whether a dtype description holds an object field (``'O'``, nested in records too)."""
    if isinstance(descr, str):
        return descr.lstrip("<>|=").startswith("O")
    if isinstance(descr, (list, tuple)):
        return any(_has_objects(item) for item in descr)
    return False
