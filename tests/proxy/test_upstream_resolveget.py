"""The proxy's fetch of a file by its resolve route (hubserver/upstream/resolveget.py) against
loopback servers of this test over real HTTP: the upstream (a Range it honours or ignores, a cut
mid-body, a redirect to its own path or to a CDN on another port) and the CDN; and an upstream over
TLS (its body received off the TLS socket into the buffer: blobstream.receivable_socket), trusted
as serve trusts one (``SSL_CERT_FILE``: client.upstream_tls)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ocibridge.hubserver.upstream import client
from ocibridge.hubserver.upstream.resolveget import Refused, ResolveGet, direct_socket
from ocibridge.hubserver.upstream.session import UpstreamSession
from ocibridge.hubserver.upstream.tee import FileFlight
from ocibridge.kinds.hf.commitdownload import HubSource

COMMIT = "c" * 40
TOKEN = "up-token"
DATA = os.urandom(2 << 20)  # more than one buffer (fileget.CHUNK): read off the socket
FILE = f"/acme/x/resolve/{COMMIT}/w.safetensors"


@dataclass
class Server:
    """One loopback server: what it does with the file's path, and every request it saw."""

    redirect: str | None = None  # answer the file's path with a 302 to this location
    cut_after: int | None = None  # the first answer's body is cut after this many bytes
    ignore_range: bool = False
    missing: bool = False
    longer: int = 0  # bytes sent after the file's: a body longer than the listing states
    chunked: bool = False  # the body sent chunked, its length told by no header
    sent: int = 0  # body bytes the connection took before the client stopped reading
    asked: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # (path, Authorization, Range)
    url: str = ""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                server.asked.append((self.path, self.headers.get("Authorization"), self.headers.get("Range")))
                if server.missing:
                    self.send_response(404)
                    self.send_header("Content-Length", str(server.longer))
                    self.end_headers()
                    with contextlib.suppress(OSError):  # the refusal's body: read no further than its reason
                        for _ in range(server.longer >> 20):
                            self.wfile.write(bytes(1 << 20))
                            server.sent += 1 << 20
                    return
                if self.path == FILE and server.redirect is not None:
                    self.send_response(302)
                    self.send_header("Location", server.redirect)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = 0
                m = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
                if m and not server.ignore_range:
                    start = int(m.group(1))
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(DATA) - 1}/{len(DATA)}")
                else:
                    self.send_response(200)
                if server.longer or server.chunked:
                    return self._longer()
                self.send_header("Content-Length", str(len(DATA) - start))
                self.end_headers()
                body = DATA[start:]
                if server.cut_after is not None:
                    body, server.cut_after = body[:server.cut_after], None
                    self.wfile.write(body)
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

            def _longer(self) -> None:
                self.send_header(*(("Transfer-Encoding", "chunked") if server.chunked
                                   else ("Content-Length", str(len(DATA) + server.longer))))
                self.end_headers()
                piece = 1 << 20
                body = memoryview(DATA + bytes(server.longer))
                try:
                    for at in range(0, len(body), piece):
                        part = body[at:at + piece]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part) if server.chunked else part)
                        server.sent += len(part)
                    if server.chunked:
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass
                self.close_connection = True

        return Handler


@contextlib.contextmanager
def running(count: int, tls: ssl.SSLContext | None = None) -> Iterator[list[Server]]:
    """``count`` loopback servers (over TLS with the server context ``tls``)."""
    made, started = [], []
    for _ in range(count):
        s = Server()
        http = ThreadingHTTPServer(("127.0.0.1", 0), s.handler())
        http.daemon_threads = True
        if tls is not None:
            http.socket = tls.wrap_socket(http.socket, server_side=True)
        s.url = f"{'https' if tls else 'http'}://127.0.0.1:{http.server_address[1]}"
        threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        made.append(s)
        started.append(http)
    try:
        yield made
    finally:
        for http in started:
            http.shutdown()
            http.server_close()


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server]]:
    """The upstream, and a CDN on another port (another origin)."""
    with running(2) as (upstream, cdn):
        yield upstream, cdn


@pytest.fixture
def tls_upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """The upstream over TLS, its CA trusted as serve trusts an upstream's (``SSL_CERT_FILE``)."""
    from support.certs import make_tls_files

    files = make_tls_files(tmp_path / "tls")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(files.cert_file, files.key_file)
    monkeypatch.setenv("SSL_CERT_FILE", str(files.ca_file))
    client.upstream_tls.cache_clear()  # made once a process: made again with this CA
    try:
        with running(1, context) as (upstream,):
            yield upstream
    finally:
        client.upstream_tls.cache_clear()


def fetched(upstream: Server, tmp_path: Path, held: bytes = b"") -> FileFlight:
    """The file fetched into a partial file that held ``held``, then checked."""
    flight = FileFlight("w.safetensors", len(DATA), "sha256", hashlib.sha256(DATA).hexdigest(),
                        tmp_path / "partial", tmp_path / "snapshot" / "w.safetensors")
    if held:
        flight.partial.parent.mkdir(parents=True, exist_ok=True)
        flight.partial.write_bytes(held)
    session = UpstreamSession(upstream.url, TOKEN)
    get = ResolveGet(HubSource("acme/x", upstream.url, TOKEN, None), COMMIT, session)
    try:
        with flight.opened() as tee:
            get.get(flight, tee)
            flight.finish(tee.hexdigest(), tee.sha256())
    finally:
        session.close()
    return flight


def test_a_redirect_to_another_host_gets_no_token_one_to_the_upstream_keeps_it(servers: tuple[Server, Server],
                                                                               tmp_path: Path):
    upstream, cdn = servers
    upstream.redirect = f"{cdn.url}/signed/w?sig=1"
    flight = fetched(upstream, tmp_path / "cdn")
    assert flight.checked and flight.final.read_bytes() == DATA
    assert upstream.asked == [(FILE, f"Bearer {TOKEN}", None)]
    assert cdn.asked == [("/signed/w?sig=1", None, None)]  # the CDN never sees the upstream's token
    upstream.redirect, upstream.asked = "/cas/w", []  # on the upstream's own origin: the token goes along
    flight = fetched(upstream, tmp_path / "own")
    assert flight.checked
    assert upstream.asked == [(FILE, f"Bearer {TOKEN}", None), ("/cas/w", f"Bearer {TOKEN}", None)]


def test_a_cut_mid_body_resumes_from_the_last_byte_received_and_the_file_checks(servers: tuple[Server, Server],
                                                                              tmp_path: Path):
    upstream, _ = servers
    upstream.cut_after = 700_001  # not a whole buffer: what arrived after the last full one is kept too
    flight = fetched(upstream, tmp_path)
    assert flight.checked and flight.final.read_bytes() == DATA
    assert [r for _, _, r in upstream.asked] == [None, "bytes=700001-"]


def test_a_held_start_is_asked_for_the_rest_and_one_the_upstream_ignores_is_fetched_whole(
        servers: tuple[Server, Server], tmp_path: Path):
    upstream, _ = servers
    flight = fetched(upstream, tmp_path / "honoured", held=DATA[:1000])
    assert flight.checked and upstream.asked[-1][2] == "bytes=1000-"
    upstream.ignore_range = True
    flight = fetched(upstream, tmp_path / "ignored", held=DATA[:1000])  # a 200: the whole file, once
    assert flight.checked and flight.final.read_bytes() == DATA


def test_a_file_the_upstream_does_not_have_is_refused_without_another_try(servers: tuple[Server, Server],
                                                                          tmp_path: Path):
    upstream, _ = servers
    upstream.missing, upstream.longer = True, 64 << 20  # and its 404 says so at length
    with pytest.raises(Refused, match="answered 404"):
        fetched(upstream, tmp_path)
    assert len(upstream.asked) == 1
    assert upstream.sent < 32 << 20  # the refusal's body was not read to its end


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_longer_than_the_listed_size_is_refused_before_it_fills_the_disk(servers: tuple[Server, Server],
                                                                               tmp_path: Path, chunked: bool):
    upstream, _ = servers
    upstream.longer, upstream.chunked = 64 << 20, chunked  # the listing says 2 MiB: 64 MiB more follow
    with pytest.raises(Refused, match="more than the 2097152 bytes its listing states"):
        fetched(upstream, tmp_path)
    assert (tmp_path / "partial").stat().st_size <= len(DATA)
    assert len(upstream.asked) == 1  # refused, not asked again
    assert upstream.sent < 32 << 20  # the rest was never read (what the sockets' buffers took at most)


def test_a_file_comes_whole_from_an_upstream_over_tls_and_a_cut_resumes(tls_upstream: Server, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch):
    import ocibridge.hubserver.upstream.resolveget as resolveget

    sockets: list[object] = []

    def seen(answer: object) -> object:  # which way the body came: off the TLS socket, not through httpx
        sockets.append(direct_socket(answer))  # type: ignore[arg-type]
        return sockets[-1]

    monkeypatch.setattr(resolveget, "direct_socket", seen)
    flight = fetched(tls_upstream, tmp_path / "whole")
    assert flight.checked and flight.final.read_bytes() == DATA
    assert tls_upstream.asked == [(FILE, f"Bearer {TOKEN}", None)]
    assert [type(s) for s in sockets] == [ssl.SSLSocket]
    tls_upstream.asked, tls_upstream.cut_after = [], 700_001
    flight = fetched(tls_upstream, tmp_path / "cut")
    assert flight.checked and flight.final.read_bytes() == DATA
    assert [r for _, _, r in tls_upstream.asked] == [None, "bytes=700001-"]
