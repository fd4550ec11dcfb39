"""A static HTTP server over a registry's storage directory: the "object storage" a registry's
``redirect`` middleware sends blob GETs to (tests/support/registry.py ``redirect_to``).

It answers GET and HEAD with the file under its root, honours one ``Range: bytes=A-B`` (as
object stores do; Python's own static handler ignores Range), and records each request's path,
``Authorization`` and ``Range``. ``tamper``: flip one byte of every file it sends at that offset
(storage that hands back other bytes than the registry's digest names).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from .tiny_http import TinyServer, send

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


@dataclass(frozen=True)
class Seen:
    path: str
    authorization: str | None
    range: str | None


@dataclass
class ObjectStore:
    """The server (``url``; ``stop()``) and what it was asked (``seen``)."""

    root: Path
    seen: list[Seen] = field(default_factory=list)
    tamper: int | None = None

    def __post_init__(self) -> None:
        self._server = TinyServer(self._answer)

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        self.seen.append(Seen(handler.path, handler.headers.get("Authorization"), handler.headers.get("Range")))
        path = (self.root / handler.path.split("?", 1)[0].lstrip("/")).resolve()
        if self.root.resolve() not in path.parents or not path.is_file():
            send(handler, 404)
            return
        data = bytearray(path.read_bytes())
        if self.tamper is not None and self.tamper < len(data):
            data[self.tamper] ^= 0xFF
        start, end, status, headers = 0, len(data), 200, {"Content-Type": "application/octet-stream"}
        wanted = _RANGE.match(handler.headers.get("Range") or "")
        if wanted:
            start = int(wanted[1])
            end = min(len(data), int(wanted[2]) + 1) if wanted[2] else len(data)
            status, headers["Content-Range"] = 206, f"bytes {start}-{end - 1}/{len(data)}"
        send(handler, status, bytes(data[start:end]), headers)

    @property
    def url(self) -> str:
        return self._server.url

    def stop(self) -> None:
        self._server.close()
