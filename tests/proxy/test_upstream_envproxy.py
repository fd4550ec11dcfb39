"""serve's upstream session behind a proxy the environment names (HTTP_PROXY, HTTPS_PROXY): the
proxy (a forwarding and CONNECT proxy of this test, on loopback) carries the requests, trusted as the
operator's own setting, while the host each request names is still checked by the address rule
before the proxy is asked; a host that does not resolve here is not asked through it unless
$OCIBRIDGE_PROXY_RESOLVES=1."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from urllib.parse import urlsplit

import httpx
import pytest

from ocibridge.core.addressrule import AddressRefused
from ocibridge.hubserver.upstream.session import UpstreamSession


class Target(BaseHTTPRequestHandler):
    """The upstream: answers every GET with its path."""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def proxy_handler(seen: list[str]) -> type[BaseHTTPRequestHandler]:
    class Proxy(BaseHTTPRequestHandler):
        """Forwards an absolute-URI GET; answers a CONNECT 200 and hangs up (no TLS behind it)."""

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            seen.append(f"GET {self.path}")
            url = urlsplit(self.path)
            try:
                conn = http.client.HTTPConnection(url.hostname or "", url.port or 80, timeout=5)
                conn.request("GET", url.path or "/")
                answer = conn.getresponse()
                status, body = answer.status, answer.read()
            except OSError:
                status, body = 502, b"the proxy could not reach it"
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_CONNECT(self) -> None:  # noqa: N802
            seen.append(f"CONNECT {self.path}")
            self.send_response(200)
            self.end_headers()
            self.close_connection = True

    return Proxy


def _serving(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str, list[str]]]:
    seen: list[str] = []
    target, target_url = _serving(Target)
    proxy, proxy_url = _serving(proxy_handler(seen))
    yield target_url, proxy_url, seen
    for server in (target, proxy):
        server.shutdown()
        server.server_close()


@pytest.fixture
def proxied_env(servers: tuple[str, str, list[str]], monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[str]]:
    target_url, proxy_url, seen = servers
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy_url)
    monkeypatch.setenv("HTTPS_PROXY", proxy_url)
    seen.clear()
    return target_url, seen


def test_the_environments_proxy_carries_the_upstreams_requests(proxied_env: tuple[str, list[str]]):
    target_url, seen = proxied_env
    session = UpstreamSession(target_url, None)
    try:
        assert session.http.get(f"{target_url}/api/models/acme/x").text == "/api/models/acme/x"
        assert seen == [f"GET {target_url}/api/models/acme/x"]
        port = urlsplit(target_url).port
        with pytest.raises(httpx.HTTPError):  # CONNECT for https: the test's proxy hangs up after it
            session.http.get(f"https://127.0.0.1:{port}/tls")
        assert seen[1:] == [f"CONNECT 127.0.0.1:{port}"]
    finally:
        session.close()


def test_a_target_the_rule_refuses_is_never_asked_of_the_proxy(proxied_env: tuple[str, list[str]]):
    target_url, seen = proxied_env
    session = UpstreamSession(target_url, None)  # a loopback upstream: link-local and private refused
    try:
        with pytest.raises(AddressRefused, match="169.254.169.254, a link-local address: not connected"):
            session.http.get("http://169.254.169.254/latest/meta-data")
        with pytest.raises(AddressRefused, match="10.1.2.3, a private address: not connected"):
            session.http.get("https://10.1.2.3/weights")
        assert seen == []
    finally:
        session.close()


def test_a_target_that_does_not_resolve_here_is_asked_of_the_proxy_only_when_allowed(
        proxied_env: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch):
    target_url, seen = proxied_env
    session = UpstreamSession(target_url, None)
    try:
        with pytest.raises(AddressRefused, match=r"nowhere\.invalid does not resolve here, so the address rule "
                                                 r"cannot check it: not asked through the proxy http://127\.0\.0\.1"):
            session.http.get("http://nowhere.invalid/file")
        assert seen == []
        monkeypatch.setenv("OCIBRIDGE_PROXY_RESOLVES", "1")
        assert session.http.get("http://nowhere.invalid/file").status_code == 502  # the proxy's own answer
        assert seen == ["GET http://nowhere.invalid/file"]
    finally:
        session.close()


def test_no_proxy_keeps_a_host_off_the_proxy(proxied_env: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch):
    target_url, seen = proxied_env
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    session = UpstreamSession(target_url, None)
    try:
        assert session.http.get(f"{target_url}/direct").text == "/direct"
        assert seen == []
    finally:
        session.close()


def test_a_proxy_of_a_scheme_httpx_cannot_use_is_one_error_line(proxied_env: tuple[str, list[str]],
                                                                monkeypatch: pytest.MonkeyPatch):
    from ocibridge.errors import OcibridgeError

    monkeypatch.setenv("HTTP_PROXY", "ftp://user:secret@proxy.example:21")
    with pytest.raises(OcibridgeError, match=r"the environment's proxy ftp://proxy\.example:21 cannot be used") as e:
        UpstreamSession(proxied_env[0], None)
    assert "secret" not in str(e.value)
