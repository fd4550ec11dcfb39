"""Kubernetes manifests as YAML without a YAML library at run time.

Only what JSON can hold is written: mappings, lists, strings, numbers, booleans, null. Every
string is JSON-quoted (a JSON string is a valid YAML double-quoted scalar, so ``"no"``, ``"1"``
or ``"on"`` never turn into booleans or numbers), except text of several lines (a job file in
a ConfigMap), written as a literal block so it stays readable.
"""

from __future__ import annotations

import json
import re
from typing import Any

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*\Z")
_YAML_WORDS = {"y", "yes", "n", "no", "true", "false", "on", "off", "null"}


def dump_all(documents: list[Any]) -> str:
    """Several documents separated by ``---``."""
    return "---\n".join(dump(d) for d in documents)


def dump(value: Any) -> str:
    return "\n".join(_node(value, 0)) + "\n"


def _node(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return [pad + "{}"]
        lines: list[str] = []
        for key, item in value.items():
            head = f"{pad}{_key(key)}:"
            if isinstance(item, (dict, list)) and item:
                lines.append(head)
                lines.extend(_node(item, indent + 2 if isinstance(item, dict) else indent))
            else:
                lines.extend(_inline(head, item, indent))
        return lines
    if isinstance(value, list):
        if not value:
            return [pad + "[]"]
        lines = []
        for item in value:
            if not isinstance(item, (dict, list)) or not item:
                lines.append(f"{pad}- {_scalar(item)}")
                continue
            inner = _node(item, indent + 2)
            lines.append(f"{pad}- {inner[0][indent + 2:]}")
            lines.extend(inner[1:])
        return lines
    return [pad + _scalar(value)]


def _inline(head: str, value: Any, indent: int) -> list[str]:
    """``head`` (a key and its colon) followed by a scalar or an empty collection."""
    sep = " "
    if isinstance(value, str) and _block_ok(value):
        chomp = "-" if not value.endswith("\n") else ("+" if value.endswith("\n\n") else "")
        body = value[:-1] if value.endswith("\n") else value
        pad = " " * (indent + 2)
        lines = [f"{head}{sep}|2{chomp}" if value[0] == " " else f"{head}{sep}|{chomp}"]
        lines.extend(pad + line if line else "" for line in body.split("\n"))
        return lines
    return [f"{head}{sep}{_scalar(value)}"]


def _block_ok(text: str) -> bool:
    """Multi-line text a literal block holds exactly: printable lines, no CR, no tab indent."""
    if "\n" not in text.rstrip("\n"):
        return False
    return all(c == "\n" or (c.isprintable() and c != "\ufeff") for c in text) and not text.startswith("\n")


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    raise TypeError(f"cannot write {type(value).__name__} as YAML")


def _key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError("mapping keys must be strings")
    if _PLAIN_KEY.match(key) and key.lower() not in _YAML_WORDS:
        return key
    return _quote(key)


def _quote(text: str) -> str:
    """A YAML double-quoted scalar: printable characters as they are, the rest escaped
    (``\\U`` beyond the BMP: YAML, unlike JSON, has no surrogate pairs)."""
    out = []
    for c in text:
        code = ord(c)
        if c in '"\\':
            out.append("\\" + c)
        elif c.isprintable() and c != "\ufeff":
            out.append(c)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'
