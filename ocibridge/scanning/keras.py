"""Keras models whose configuration names a ``Lambda`` layer: its function is Python bytecode
(marshalled) that Keras runs when it loads the model, the way a pickle's calls run. Found in a
``.keras`` zip's ``config.json``, in a model saved as JSON, and in an HDF5 file's ``model_config``
attribute (searched as text: the attribute is stored as written)."""

from __future__ import annotations

import re
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.lazyread.tensorfile import RangeReadable
from ocibridge.scanning.report import Finding

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
#: JSON read whole to look for layers; a model configuration is far smaller
MAX_CONFIG = 16 << 20
#: of an HDF5 file, the part searched (its root group's attributes lie at its start)
HDF5_SEARCHED = 64 << 20
_LAMBDA = re.compile(rb'"class_name"\s*:\s*"(Lambda|TFOpLambda)"')
_MAX_DEPTH = 64


def json_findings(path: str, data: bytes, where: str = "") -> list[Finding]:
    """Lambda layers in a JSON document (nothing when it is not JSON, or names no layer)."""
    if b"class_name" not in data:
        return []
    try:
        doc = boundedjson.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return []
    return [Finding(path, "high", f"Keras Lambda layer {name!r}: its Python code runs when the model loads", where)
            for name in _lambdas(doc, 0)]


def _lambdas(node: Any, depth: int) -> list[str]:
    if depth > _MAX_DEPTH:
        return []
    found: list[str] = []
    if isinstance(node, dict):
        if node.get("class_name") == "Lambda":
            config = node.get("config")
            found.append(str(config.get("name", "?")) if isinstance(config, dict) else "?")
        for value in node.values():
            found += _lambdas(value, depth + 1)
    elif isinstance(node, list):
        for value in node:
            found += _lambdas(value, depth + 1)
    return found


def hdf5_findings(path: str, content: RangeReadable, where: str = "") -> list[Finding]:
    searched = content.read(0, min(content.size, HDF5_SEARCHED))
    found = []
    if any(m.group(1) == b"Lambda" for m in _LAMBDA.finditer(searched)):
        found.append(Finding(path, "high", "Keras Lambda layer in the HDF5 model_config: its Python code runs "
                             "when the model loads", where))
    if content.size > HDF5_SEARCHED:
        found.append(Finding(path, "info", f"HDF5 file searched for Keras layers in its first {HDF5_SEARCHED} "
                             "bytes only", where))
    return found
