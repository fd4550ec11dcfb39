"""Credentials never travel over a weaker channel than the user chose (issue 34, item 6).

A hostile HTTPS registry on loopback, with a certificate the client verifies (a private CA in the
settings file), challenges with a Bearer realm at a plain-HTTP token server that records every
request. With credentials configured, the token server must never see one; the command fails with
one line. Several realms of the class are tried (another port, the registry's own host and port,
a path, a query); marking the realm host plain HTTP in the settings file is the explicit way out.
"""

from __future__ import annotations

import base64
import http.server
import json
import ssl
from collections.abc import Callable, Iterator

import pytest
from support.certs import make_tls_files
from support.tiny_http import Answer, TinyServer, send, tls_context

from ocibridge.cli import main

USER, PASSWORD = "alice", "s3cret-pass"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


class _Server(TinyServer):
    """A loopback HTTP(S) server whose answer to every request is ``answer(handler)``; it records
    the (path, Authorization) of every request."""

    def __init__(self, answer: Answer, tls: ssl.SSLContext | None = None, bind: str = "127.0.0.1") -> None:
        self.seen: list[tuple[str, str | None]] = []

        def record(handler: http.server.BaseHTTPRequestHandler) -> None:
            self.seen.append((handler.path, handler.headers.get("Authorization")))
            answer(handler)

        super().__init__(record, tls=tls, bind=bind)


def _token_answer(h: http.server.BaseHTTPRequestHandler) -> None:
    send(h, 200, json.dumps({"token": "t", "expires_in": 300}).encode(), {"Content-Type": "application/json"})


def _registry_answer(realm: Callable[[], str], service: str) -> Answer:
    """A registry's answer: the tag list to a Bearer token, else a challenge at ``realm()``."""

    def answer(h: http.server.BaseHTTPRequestHandler) -> None:
        if (h.headers.get("Authorization") or "").startswith("Bearer "):
            send(h, 200, json.dumps({"name": "team/m", "tags": ["v1"]}).encode(), {"Content-Type": "application/json"})
        else:
            send(h, 401, b"{}", {"WWW-Authenticate": f'Bearer realm="{realm()}",service="{service}"'})

    return answer


def _store_credentials(tmp_path, monkeypatch, registry_host: str) -> None:
    """The user's password for ``registry_host`` in a docker config."""
    auth = {"auths": {registry_host: {"auth": base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}}}
    (tmp_path / "docker").mkdir(exist_ok=True)
    (tmp_path / "docker" / "config.json").write_text(json.dumps(auth))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))


@pytest.fixture
def setup(tmp_path, monkeypatch) -> Iterator[Callable[[Callable[[str, str], str]], tuple[_Server, _Server]]]:
    """start(realm_of): (HTTPS registry, plain-HTTP token server), the registry's realm being
    ``realm_of(token_server_host, registry_host)``; credentials for the registry in a docker
    config, its CA in the settings file."""
    tls = make_tls_files(tmp_path / "tls")
    context = tls_context(tls.cert_file, tls.key_file)
    servers: list[_Server] = []

    def start(realm_of: Callable[[str, str], str]) -> tuple[_Server, _Server]:
        token = _Server(_token_answer)
        realm: list[str] = []
        registry = _Server(_registry_answer(lambda: realm[0], service="reg"), tls=context)
        realm.append(realm_of(token.host, registry.host))
        servers.extend([token, registry])
        _store_credentials(tmp_path, monkeypatch, registry.host)
        settings = tmp_path / "registries.toml"
        settings.write_text(f'[registry."{registry.host}"]\nca_file = "{tls.ca_file}"\n')
        monkeypatch.setenv("OCIBRIDGE_REGISTRIES_CONF", str(settings))
        return registry, token

    yield start
    for server in servers:
        server.close()


REALMS: dict[str, Callable[[str, str], str]] = {
    "token host": lambda token, reg: f"http://{token}/token",
    "token host, path and query": lambda token, reg: f"http://{token}/v2/token?account={USER}&x=1",
    "upper-case scheme": lambda token, reg: f"HTTP://{token}/token",
}


@pytest.mark.parametrize("name", list(REALMS))
def test_credentials_never_go_to_a_plain_http_realm(setup, capsys, name):
    registry, token = setup(REALMS[name])
    assert main(["tags", f"{registry.host}/team/m"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ocibridge: error: ") and err.count("\n") == 1, err
    assert "plain HTTP" in err and "cleartext" in err and token.host in err
    assert registry.seen, "the registry was asked"
    assert [auth for _, auth in token.seen if auth] == []  # no credentials over http
    assert token.seen == []  # not even a request


def test_realm_on_the_registry_host_over_http_is_refused(setup, capsys):
    """The registry's own host and port, spoken to in cleartext, is still a weaker channel."""
    registry, _ = setup(lambda token, reg: f"http://{reg}/token")
    assert main(["tags", f"{registry.host}/team/m"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cleartext" in err
    assert all(auth is None or not auth.startswith("Basic") for _, auth in registry.seen)


def test_realm_host_marked_plain_http_gets_the_credentials(setup, capsys, tmp_path):
    """The explicit way out: the user marks the token server's host plain HTTP."""
    registry, token = setup(REALMS["token host"])
    settings = tmp_path / "registries.toml"
    settings.write_text(settings.read_text() + f'\n[registry."{token.host}"]\nplain_http = true\n')
    assert main(["tags", f"{registry.host}/team/m"]) == 0
    assert "v1" in capsys.readouterr().out
    assert [auth for _, auth in token.seen] == [BASIC]


def _outward_address() -> str | None:
    """This machine's address on its way out (no packet is sent), if it is not loopback."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if address.startswith("127.") else address


def test_a_plain_http_loopback_registry_sends_no_credentials_to_a_realm_off_the_machine(tmp_path, monkeypatch,
                                                                                         capsys):
    """Plain HTTP by default is for loopback only: a loopback registry's cleartext realm on an
    address off this machine (one the user did not mark plain HTTP) gets no stored credentials."""
    outward = _outward_address()
    if outward is None:
        pytest.skip("no non-loopback IPv4 address")
    token = _Server(_token_answer, bind=outward)
    registry = _Server(_registry_answer(lambda: f"http://{token.host}/token", service="r"))
    try:
        _store_credentials(tmp_path, monkeypatch, registry.host)
        monkeypatch.setenv("OCIBRIDGE_REGISTRIES_CONF", str(tmp_path / "none.toml"))
        assert main(["tags", f"{registry.host}/team/m"]) == 1
        err = capsys.readouterr().err
        assert "plain HTTP off this machine" in err and "cleartext" in err and err.count("\n") == 1, err
        assert registry.seen and token.seen == []
        (tmp_path / "marked.toml").write_text(f'[registry."{token.host}"]\nplain_http = true\n')
        monkeypatch.setenv("OCIBRIDGE_REGISTRIES_CONF", str(tmp_path / "marked.toml"))
        assert main(["tags", f"{registry.host}/team/m"]) == 0  # marked by the user: allowed
        assert [auth for _, auth in token.seen] == [BASIC]
    finally:
        token.close()
        registry.close()
