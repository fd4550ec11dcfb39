"""A reverse proxy that forwards a request only once its whole body has arrived.

nginx does this by default (``proxy_request_buffering on``), and registries are often deployed
behind it. For an upload it means that a client killed half-way through a PATCH leaves no trace
at the registry, whose upload session then survives with the chunks it confirmed (straight to
distribution 2.8 the cut body is written, and the session is refused from then on). Used by
bench/network.py between the shaped link and the registry; answers stream back as they come.

    python bench/bufferproxy.py --listen 127.0.0.1:5002 --upstream 127.0.0.1:5001
"""

from __future__ import annotations

import argparse
import http.client
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PIECE = 256 * 1024
HOP_BY_HOP = frozenset({"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
                        "expect", "proxy-connection", "content-length"})


class _Cut(Exception):
    """The client went away before its body ended: nothing is forwarded."""


def make_handler(upstream: str) -> type[BaseHTTPRequestHandler]:
    host, _, port = upstream.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def do_GET(self) -> None:  # noqa: N802
            try:
                body = self._body()
            except _Cut:
                self.close_connection = True
                return
            conn = http.client.HTTPConnection(host, int(port), timeout=300)
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():  # Host kept: Location points back here
                    if name.lower() not in HOP_BY_HOP:
                        conn.putheader(name, value)
                if body is not None:
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body)
                self._relay(conn.getresponse())
            finally:
                conn.close()

        do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_GET  # noqa: N815

        def _body(self) -> bytes | None:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                parts = []
                while True:
                    line = self.rfile.readline(65537)
                    if not line:
                        raise _Cut
                    size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                            pass
                        return b"".join(parts)
                    parts.append(self._exactly(size))
                    self.rfile.readline(3)
            if "Content-Length" not in self.headers:
                return None
            return self._exactly(int(self.headers["Content-Length"]))

        def _exactly(self, n: int) -> bytes:
            parts, left = [], n
            while left:
                piece = self.rfile.read(min(PIECE, left))
                if not piece:
                    raise _Cut
                parts.append(piece)
                left -= len(piece)
            return b"".join(parts)

        def _relay(self, resp: http.client.HTTPResponse) -> None:
            length = resp.getheader("Content-Length")
            no_body = self.command == "HEAD" or resp.status in (204, 304)
            self.send_response_only(resp.status, resp.reason)
            for name, value in resp.getheaders():
                if name.lower() not in HOP_BY_HOP:
                    self.send_header(name, value)
            if no_body or length is not None:
                self.send_header("Content-Length", length or "0")
            else:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if no_body:
                return
            while piece := resp.read(PIECE):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if length is None else piece)
            if length is None:
                self.wfile.write(b"0\r\n\r\n")

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, help="HOST:PORT")
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the registry")
    opts = parser.parse_args()
    host, _, port = opts.listen.rpartition(":")
    server = ThreadingHTTPServer((host, int(port)), make_handler(opts.upstream))
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
