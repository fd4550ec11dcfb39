"""LINKS files are fetched through the registry client's stack (kinds/carton/links.py): a 503 is
retried, a private CA given as a pull's ``--ca-file`` is trusted, and every connection is closed
after use. Real HTTP(S) servers on loopback, no mocks."""

from __future__ import annotations

import hashlib
import http.server
import ssl
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.certs import make_tls_files

from ocibridge.errors import OcibridgeError
from ocibridge.kinds.carton.links import LinkFetcher
from ocibridge.stores.registry.options import RegistryOptions

ROOT = Path(__file__).resolve().parents[2]
DATA = bytes(range(256)) * 400
SHA = hashlib.sha256(DATA).hexdigest()
FAST = RegistryOptions(backoff_base=0.01, backoff_cap=0.05)


class Flaky:
    """Serves ``/w`` (DATA); the first ``failures`` GETs answer 503. Logs every request."""

    def __init__(self, failures: int = 0, tls: ssl.SSLContext | None = None) -> None:
        self.failures, self.seen = failures, []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                outer.seen.append((self.command, self.path))
                if self.command == "GET" and outer.failures > 0:
                    outer.failures -= 1
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(DATA)))
                self.end_headers()
                if self.command == "GET":
                    self.wfile.write(DATA)

            do_HEAD = do_GET

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}/w"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def flaky() -> Iterator[Flaky]:
    server = Flaky(failures=1)
    yield server
    server.close()


def test_a_503_is_retried(tmp_path: Path, flaky: Flaky) -> None:
    fetcher = LinkFetcher(tmp_path / "cache", options=FAST)
    assert fetcher.fetch(SHA, [flaky.url], "w").read_bytes() == DATA
    assert [s for s in flaky.seen if s[0] == "GET"] == [("GET", "/w")] * 2  # the 503, then the retry


def test_a_private_ca_given_as_for_a_pull_is_trusted(tmp_path: Path) -> None:
    tls = make_tls_files(tmp_path / "pki")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tls.cert_file), str(tls.key_file))
    server = Flaky(tls=context)
    try:
        with pytest.raises(OcibridgeError, match="cannot fetch"):  # not trusted without it
            LinkFetcher(tmp_path / "untrusted", options=FAST).fetch(SHA, [server.url], "w")
        trusted = LinkFetcher(tmp_path / "cache", options=RegistryOptions(ca_file=str(tls.ca_file)))
        assert trusted.size_of(SHA, [server.url]) == len(DATA)
        assert trusted.fetch(SHA, [server.url], "w").read_bytes() == DATA
    finally:
        server.close()


def test_every_connection_is_closed_after_use(tmp_path: Path) -> None:
    """A ResourceWarning (an unclosed socket or client) fails the run, which ends by collecting
    everything the fetcher left."""
    code = textwrap.dedent(f"""
        import gc, sys
        sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(ROOT / "tests")!r}]
        from test_carton_links_stack import FAST, SHA, Flaky
        from ocibridge.kinds.carton.links import LinkFetcher

        server = Flaky(failures=1)
        fetcher = LinkFetcher({str(tmp_path / "cache")!r}, options=FAST)
        assert fetcher.size_of(SHA, [server.url]) is not None
        fetcher.fetch(SHA, [server.url], "w")
        del fetcher
        gc.collect()
        server.close()
        print("done")
    """)
    done = subprocess.run([sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", code],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr
    assert "ResourceWarning" not in done.stderr and "unclosed" not in done.stderr, done.stderr
