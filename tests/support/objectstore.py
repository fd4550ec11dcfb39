"""A static HTTP server over a registry's storage directory: the "object storage" a registry's
``redirect`` middleware sends blob GETs to (tests/support/registry.py ``redirect_to``).

It answers GET and HEAD with the file under its root, honours one ``Range: bytes=A-B`` (as
object stores do; Python's own static handler ignores Range), and records each request's path,
``Authorization`` and ``Range``. ``tamper``: flip one byte of every file it sends at that offset
(storage that hands back other bytes than the registry's digest names).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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
        store = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _answer(self, body: bool) -> None:
                store.seen.append(Seen(self.path, self.headers.get("Authorization"), self.headers.get("Range")))
                path = (store.root / self.path.split("?", 1)[0].lstrip("/")).resolve()
                if store.root.resolve() not in path.parents or not path.is_file():
                    self.send_error(404)
                    return
                data = bytearray(path.read_bytes())
                if store.tamper is not None and store.tamper < len(data):
                    data[store.tamper] ^= 0xFF
                start, end, status = 0, len(data), 200
                wanted = _RANGE.match(self.headers.get("Range") or "")
                if wanted:
                    start = int(wanted[1])
                    end = min(len(data), int(wanted[2]) + 1) if wanted[2] else len(data)
                    status = 206
                self.send_response(status)
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
                self.send_header("Content-Length", str(end - start))
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                if body:
                    self.wfile.write(data[start:end])

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
