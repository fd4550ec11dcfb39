"""A tiny threaded HTTP(S) server on loopback whose every answer is a test's function: the one
shape behind the hostile registries, token servers and object stores the tests stand up."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Answer = Callable[[BaseHTTPRequestHandler], None]


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes = b"",
         headers: dict[str, str] | None = None) -> None:
    """One whole answer with its Content-Length; a HEAD gets the headers only."""
    handler.send_response(status)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)


class TinyServer:
    """Answers every GET, HEAD and POST with ``answer(handler)`` (HTTP/1.1, keep-alive), over TLS
    when given ``tls``; ``host`` is ``bind:port``, ``url`` with its scheme, ``close()`` stops it."""

    def __init__(self, answer: Answer, tls: ssl.SSLContext | None = None, bind: str = "127.0.0.1") -> None:
        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                answer(self)

            do_HEAD = do_GET
            do_POST = do_GET

        self.server = ThreadingHTTPServer((bind, 0), _Handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.host = f"{bind}:{self.server.server_address[1]}"
        self.url = f"{'https' if tls is not None else 'http'}://{self.host}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def tls_context(cert_file: object, key_file: object) -> ssl.SSLContext:
    """A server-side TLS context over a certificate and its key (support.certs.make_tls_files)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert_file), str(key_file))
    return context
