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
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.certs import make_tls_files
from support.tiny_http import TinyServer, send, tls_context

from ocibridge.errors import OcibridgeError
from ocibridge.kinds.carton.links import LinkFetcher
from ocibridge.stores.registry.options import RegistryOptions

ROOT = Path(__file__).resolve().parents[2]
DATA = bytes(range(256)) * 400
SHA = hashlib.sha256(DATA).hexdigest()
FAST = RegistryOptions(backoff_base=0.01, backoff_cap=0.05)


class Flaky(TinyServer):
    """Serves ``/w`` (DATA); the first ``failures`` GETs answer 503. Logs every request."""

    def __init__(self, failures: int = 0, tls: ssl.SSLContext | None = None) -> None:
        self.failures, self.seen = failures, []

        def answer(handler: http.server.BaseHTTPRequestHandler) -> None:
            self.seen.append((handler.command, handler.path))
            if handler.command == "GET" and self.failures > 0:
                self.failures -= 1
                send(handler, 503)
            else:
                send(handler, 200, DATA)

        super().__init__(answer, tls=tls)
        self.url += "/w"


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
    server = Flaky(tls=tls_context(tls.cert_file, tls.key_file))
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
