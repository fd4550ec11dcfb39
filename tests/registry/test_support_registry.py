"""The registry test infrastructure itself, proven with real tools (httpx, skopeo) against a real
distribution registry: each fixture variant, the token server's per-scope grants, and every
fault-proxy action doing what it says on the wire."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from support import (
    FaultProxy,
    RegistryProcess,
    RegistryUnavailable,
    corrupt,
    delay,
    drop_request,
    drop_response,
    lose_response,
    new_repo,
    server_error,
    status,
    too_many_requests,
    truncate,
    write_tiny_image,
)
from support.registry import ExternalRegistry, registry_binary
from support.token_server import REGISTRY_LEEWAY

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def with_query(url: str, **params: str) -> str:
    """Append to a Location that may already carry `_state` (httpx `params=` would replace it)."""
    extra = "&".join(f"{k}={v}" for k, v in params.items())
    return url + ("&" if "?" in url else "?") + extra


def push_blob(client: httpx.Client, repo: str, data: bytes) -> str:
    """Monolithic POST + PUT?digest=; returns the digest."""
    digest = sha256(data)
    start = client.post(f"/v2/{repo}/blobs/uploads/")
    assert start.status_code == 202, start.text
    done = client.put(with_query(start.headers["Location"], digest=digest), content=data,
                      headers={"Content-Type": "application/octet-stream"})
    assert done.status_code == 201, done.text
    return digest


def jwt_claims(token: str) -> dict[str, object]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def skopeo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["skopeo", *args], capture_output=True, text=True, timeout=60)


# -- plain registries ------------------------------------------------------------------------
def test_plain_registry_answers_v2(registry) -> None:
    resp = httpx.get(f"{registry.url}/v2/")
    assert resp.status_code == 200
    assert resp.headers["Docker-Distribution-Api-Version"] == "registry/2.0"
    assert registry.url == f"http://{registry.host}"


def test_registries_are_independent_and_deletes_work(registry, registry2, unique_repo) -> None:
    assert registry.host != registry2.host
    with httpx.Client(base_url=registry.url) as one, httpx.Client(base_url=registry2.url) as two:
        digest = push_blob(one, unique_repo, b"only in the first registry")
        assert one.head(f"/v2/{unique_repo}/blobs/{digest}").status_code == 200
        assert two.head(f"/v2/{unique_repo}/blobs/{digest}").status_code == 404
        assert one.delete(f"/v2/{unique_repo}/blobs/{digest}").status_code == 202
        assert one.head(f"/v2/{unique_repo}/blobs/{digest}").status_code == 404


def test_registry_process_starts_logs_and_stops(tmp_path: Path) -> None:
    reg = RegistryProcess(tmp_path / "r")
    try:
        assert httpx.get(f"{reg.url}/v2/").status_code == 200
        assert "GET /v2/" in reg.log_file.read_text()
    finally:
        reg.stop()
    assert not reg.running()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{reg.url}/v2/", timeout=2)


def test_missing_binary_fails_with_install_hint(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RegistryUnavailable, match=r"apt-get install -y docker-registry"):
        registry_binary()


def test_external_registry_from_env_value() -> None:
    plain = ExternalRegistry.from_env_value("localhost:5000")
    assert (plain.host, plain.url, plain.tls) == ("localhost:5000", "http://localhost:5000", False)
    tls = ExternalRegistry.from_env_value("https://reg.example:8443/")
    assert (tls.host, tls.url, tls.tls) == ("reg.example:8443", "https://reg.example:8443", True)


def test_unique_repo_is_unique(unique_repo) -> None:
    assert unique_repo.startswith("test/") and len(unique_repo) == len("test/") + 8
    assert new_repo("team") != new_repo("team")


# -- htpasswd ---------------------------------------------------------------------------------
def test_auth_registry_challenges_basic(auth_registry) -> None:
    anon = httpx.get(f"{auth_registry.url}/v2/")
    assert anon.status_code == 401
    assert anon.headers["WWW-Authenticate"] == 'Basic realm="ocibridge-test"'
    wrong = httpx.get(f"{auth_registry.url}/v2/", auth=(auth_registry.username, "nope"))
    assert wrong.status_code == 401
    right = httpx.get(f"{auth_registry.url}/v2/",
                      auth=(auth_registry.username, auth_registry.password))
    assert right.status_code == 200


def test_skopeo_pushes_with_basic_credentials(auth_registry, tmp_path: Path) -> None:
    image = write_tiny_image(tmp_path / "layout")
    repo = new_repo()
    dest = f"docker://{auth_registry.host}/{repo}:v1"
    denied = skopeo("copy", "--dest-tls-verify=false", f"oci:{image.path}:latest", dest)
    assert denied.returncode != 0
    creds = f"{auth_registry.username}:{auth_registry.password}"
    ok = skopeo("copy", "--dest-tls-verify=false", "--dest-creds", creds,
                f"oci:{image.path}:latest", dest)
    assert ok.returncode == 0, ok.stderr
    got = httpx.get(f"{auth_registry.url}/v2/{repo}/manifests/v1", headers={"Accept": OCI_MANIFEST},
                    auth=(auth_registry.username, auth_registry.password))
    assert got.content == image.manifest


# -- token auth -------------------------------------------------------------------------------
def test_token_registry_bearer_flow_by_hand(token_registry) -> None:
    ts = token_registry.token_server
    ts.clear()
    challenge = httpx.get(f"{token_registry.url}/v2/")
    assert challenge.status_code == 401
    assert challenge.headers["WWW-Authenticate"] == (
        f'Bearer realm="{token_registry.realm}",service="{token_registry.service}"'
    )
    repo = new_repo("team")
    scope = f"repository:{repo}:pull,push"
    answer = httpx.get(token_registry.realm,
                       params={"service": token_registry.service, "scope": scope},
                       auth=(token_registry.username, token_registry.password))
    assert answer.status_code == 200
    token = answer.json()["token"]
    claims = jwt_claims(token)
    assert claims["access"] == [{"type": "repository", "name": repo, "actions": ["pull", "push"]}]
    with httpx.Client(base_url=token_registry.url,
                      headers={"Authorization": f"Bearer {token}"}) as client:
        digest = push_blob(client, repo, b"pushed with a bearer token")
        head = client.head(f"/v2/{repo}/blobs/{digest}")
        assert head.status_code == 200
        assert head.headers["Docker-Content-Digest"] == digest
        # the token is per scope: another repository is refused with insufficient_scope
        other = client.head(f"/v2/{new_repo('team')}/blobs/{digest}")
        assert other.status_code == 401
        assert 'error="insufficient_scope"' in other.headers["WWW-Authenticate"]
    assert [r.scopes for r in ts.requests] == [(scope,)]
    assert ts.requests[0].account == "alice"


def test_token_server_grants_only_what_policy_allows(token_registry) -> None:
    realm, service = token_registry.realm, token_registry.service

    def ask(scope: str, auth: tuple[str, str] | None) -> httpx.Response:
        return httpx.get(realm, params={"service": service, "scope": scope}, auth=auth)

    alice = (token_registry.username, token_registry.password)
    elsewhere = ask("repository:other/x:pull,push", alice)
    assert jwt_claims(elsewhere.json()["token"])["access"] == [
        {"type": "repository", "name": "other/x", "actions": ["pull"]}
    ]
    # a real registry rejects a push with that pull-only token
    token = elsewhere.json()["token"]
    refused = httpx.post(f"{token_registry.url}/v2/other/x/blobs/uploads/",
                         headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 401
    challenge = refused.headers["WWW-Authenticate"]
    assert 'error="insufficient_scope"' in challenge
    # distribution lists the wanted actions in map order: pull,push or push,pull
    assert re.search(r'scope="repository:other/x:(pull,push|push,pull)"', challenge), challenge
    bob = ("bob", token_registry.password_of("bob"))
    assert jwt_claims(ask("repository:team/x:push,pull", bob).json()["token"])["access"] == [
        {"type": "repository", "name": "team/x", "actions": ["pull"]}
    ]
    assert ask("repository:team/x:pull", ("alice", "wrong")).status_code == 401
    anon_public = ask("repository:public/x:pull", None).json()["token"]
    assert jwt_claims(anon_public)["access"][0]["name"] == "public/x"
    assert jwt_claims(ask("repository:team/x:pull", None).json()["token"])["access"] == []
    admin = ("admin", token_registry.password_of("admin"))
    catalog = ask("registry:catalog:*", admin).json()["token"]
    assert httpx.get(f"{token_registry.url}/v2/_catalog",
                     headers={"Authorization": f"Bearer {catalog}"}).status_code == 200


def test_token_expires_at_the_registry_when_expires_in_says(token_registry) -> None:
    """expires_in is real: the registry accepts the token at once and refuses it after."""
    ts = token_registry.token_server
    saved = ts.expires_in
    ts.expires_in = 2
    before = time.time()
    try:
        answer = httpx.get(token_registry.realm,
                           params={"service": token_registry.service,
                                   "scope": "repository:team/expiry:pull"},
                           auth=(token_registry.username, token_registry.password)).json()
    finally:
        ts.expires_in = saved
    after = time.time()
    assert answer["expires_in"] == 2
    expires_at = jwt_claims(answer["token"])["exp"] + REGISTRY_LEEWAY
    assert before + 2 <= expires_at <= after + 3  # valid for at least expires_in seconds
    headers = {"Authorization": f"Bearer {answer['token']}"}
    url = f"{token_registry.url}/v2/team/expiry/tags/list"
    fresh = httpx.get(url, headers=headers)
    assert fresh.status_code == 404  # authorized; the repository just does not exist
    time.sleep(max(0.0, expires_at - time.time()) + 0.1)
    stale = httpx.get(url, headers=headers)
    assert stale.status_code == 401
    assert 'error="invalid_token"' in stale.headers["WWW-Authenticate"]


def test_token_server_oauth_post_and_refresh(token_registry) -> None:
    form = {"grant_type": "password", "service": token_registry.service,
            "scope": "repository:team/y:pull", "client_id": "ocibridge-tests",
            "username": token_registry.username, "password": token_registry.password}
    first = httpx.post(token_registry.realm, data=form)
    assert first.status_code == 200
    refresh = first.json()["refresh_token"]
    again = httpx.post(token_registry.realm, data={
        "grant_type": "refresh_token", "refresh_token": refresh,
        "service": token_registry.service, "scope": "repository:team/y:pull,push"})
    assert jwt_claims(again.json()["token"])["access"][0]["actions"] == ["pull", "push"]
    bogus = httpx.post(token_registry.realm, data={"grant_type": "refresh_token",
                                                   "refresh_token": "nope"})
    assert bogus.status_code == 401


def test_skopeo_uses_the_token_flow(token_registry, tmp_path: Path) -> None:
    ts = token_registry.token_server
    image = write_tiny_image(tmp_path / "layout")
    creds = f"{token_registry.username}:{token_registry.password}"
    repo = new_repo("team")
    ts.clear()
    ok = skopeo("copy", "--dest-tls-verify=false", "--dest-creds", creds,
                f"oci:{image.path}:latest", f"docker://{token_registry.host}/{repo}:v1")
    assert ok.returncode == 0, ok.stderr
    assert f"repository:{repo}:pull,push" in ts.scopes_requested()
    forbidden = skopeo("copy", "--dest-tls-verify=false", "--dest-creds", creds,
                       f"oci:{image.path}:latest",
                       f"docker://{token_registry.host}/{new_repo('other')}:v1")
    assert forbidden.returncode != 0
    assert "denied" in forbidden.stderr


# -- TLS --------------------------------------------------------------------------------------
def test_tls_registry_needs_its_ca(tls_registry, tmp_path: Path) -> None:
    assert tls_registry.url == f"https://{tls_registry.host}"
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{tls_registry.url}/v2/")
    ctx = ssl.create_default_context(cafile=str(tls_registry.ca_file))
    assert httpx.get(f"{tls_registry.url}/v2/", verify=ctx).status_code == 200
    image = write_tiny_image(tmp_path / "layout")
    dest = f"docker://{tls_registry.host}/{new_repo()}:v1"
    untrusted = skopeo("copy", f"oci:{image.path}:latest", dest)
    assert untrusted.returncode != 0 and "certificate" in untrusted.stderr
    ok = skopeo("copy", "--dest-cert-dir", str(tls_registry.cert_dir),
                f"oci:{image.path}:latest", dest)
    assert ok.returncode == 0, ok.stderr


# -- skopeo interop on the plain registry -----------------------------------------------------
def test_skopeo_copies_tiny_layout_byte_identically(registry, unique_repo, tmp_path: Path) -> None:
    image = write_tiny_image(tmp_path / "layout")
    ok = skopeo("copy", "--dest-tls-verify=false", f"oci:{image.path}:latest",
                f"docker://{registry.host}/{unique_repo}:v1")
    assert ok.returncode == 0, ok.stderr
    got = httpx.get(f"{registry.url}/v2/{unique_repo}/manifests/v1",
                    headers={"Accept": OCI_MANIFEST})
    assert got.headers["Docker-Content-Digest"] == image.manifest_digest
    assert got.content == image.manifest
    for digest, data in image.blobs.items():
        if digest == image.manifest_digest:
            continue
        assert httpx.get(f"{registry.url}/v2/{unique_repo}/blobs/{digest}").content == data


# -- fault proxy ------------------------------------------------------------------------------
@pytest.fixture
def blob(registry, unique_repo) -> tuple[str, str, bytes]:
    """(repo, digest, data): a 300 kB random blob already in `registry`."""
    data = os.urandom(300_000)
    with httpx.Client(base_url=registry.url) as client:
        digest = push_blob(client, unique_repo, data)
    return unique_repo, digest, data


def test_proxy_passes_through_and_rewrites_location(fault_proxy: FaultProxy, registry,
                                                    unique_repo) -> None:
    with httpx.Client(base_url=fault_proxy.url) as client:
        assert client.get("/v2/").status_code == 200
        digest = push_blob(client, unique_repo, b"through the proxy")
        assert client.head(f"/v2/{unique_repo}/blobs/{digest}").status_code == 200
    post = fault_proxy.requests_matching("POST", r"/blobs/uploads/$")[0]
    assert post.upstream_location.startswith(registry.url + "/v2/")
    put = fault_proxy.requests_matching("PUT")[0]
    assert put.path.startswith(f"/v2/{unique_repo}/blobs/uploads/")
    assert put.request_bytes == len(b"through the proxy") and put.status == 201
    assert [r.method for r in fault_proxy.requests] == ["GET", "POST", "PUT", "HEAD"]


def test_proxy_drop_response_then_range_resume(fault_proxy: FaultProxy, blob) -> None:
    repo, digest, data = blob
    fault_proxy.add("GET", r"/blobs/sha256:", drop_response(after=100_000))
    url = f"{fault_proxy.url}/v2/{repo}/blobs/{digest}"
    got = bytearray()
    with pytest.raises(httpx.RemoteProtocolError), httpx.stream("GET", url) as resp:
        assert resp.headers["Content-Length"] == str(len(data))
        for piece in resp.iter_bytes():
            got += piece
    assert bytes(got) == data[:100_000]
    rest = httpx.get(url, headers={"Range": f"bytes={len(got)}-"})
    assert rest.status_code == 206
    assert bytes(got) + rest.content == data
    first, second = fault_proxy.requests_matching("GET", r"/blobs/sha256:")
    assert (first.action, first.response_bytes, first.range) == ("drop_response", 100_000, None)
    assert (second.action, second.range, second.status) == (None, "bytes=100000-", 206)


def test_proxy_truncate_keeps_length_sends_less(fault_proxy: FaultProxy, blob) -> None:
    repo, digest, data = blob
    fault_proxy.add("GET", r"/blobs/", truncate(missing=7))
    got = bytearray()
    with pytest.raises(httpx.RemoteProtocolError), httpx.stream(
        "GET", f"{fault_proxy.url}/v2/{repo}/blobs/{digest}"
    ) as resp:
        assert int(resp.headers["Content-Length"]) == len(data)
        for piece in resp.iter_bytes():
            got += piece
    assert bytes(got) == data[:-7]
    assert fault_proxy.requests[-1].response_bytes == len(data) - 7


def test_proxy_corrupt_flips_one_byte(fault_proxy: FaultProxy, blob) -> None:
    repo, digest, data = blob
    fault_proxy.add("GET", r"/blobs/", corrupt(offset=200_000))
    resp = httpx.get(f"{fault_proxy.url}/v2/{repo}/blobs/{digest}")
    assert resp.status_code == 200 and len(resp.content) == len(data)
    assert resp.headers["Docker-Content-Digest"] == digest
    assert sha256(resp.content) != digest
    diff = [i for i, (a, b) in enumerate(zip(resp.content, data, strict=True)) if a != b]
    assert diff == [200_000]
    assert httpx.get(f"{fault_proxy.url}/v2/{repo}/blobs/{digest}").content == data  # times=1


def test_proxy_429_with_retry_after_for_first_k(fault_proxy: FaultProxy, blob) -> None:
    repo, digest, _ = blob
    rule = fault_proxy.add("HEAD", r"/blobs/", too_many_requests(retry_after=3), times=2)
    url = f"{fault_proxy.url}/v2/{repo}/blobs/{digest}"
    with httpx.Client() as client:  # keep-alive across the injected answers
        codes = [client.head(url) for _ in range(3)]
    assert [r.status_code for r in codes] == [429, 429, 200]
    assert codes[0].headers["Retry-After"] == "3"
    assert (rule.matched, rule.applied) == (2, 2)


def test_proxy_500_burst_and_skip(fault_proxy: FaultProxy) -> None:
    fault_proxy.add("GET", r"^/v2/$", server_error(), times=2, skip=1)
    with httpx.Client(base_url=fault_proxy.url) as client:
        codes = [client.get("/v2/").status_code for _ in range(4)]
    assert codes == [200, 500, 500, 200]
    assert [r.action for r in fault_proxy.requests] == [None, "status", "status", None]


def test_proxy_drop_request_mid_upload(fault_proxy: FaultProxy, registry, unique_repo) -> None:
    """A PATCH cut after 50 kB: distribution 2.8 keeps the partial bytes, which invalidates
    the upload's state token, so the only recovery is a new upload."""
    data = os.urandom(200_000)
    fault_proxy.add("PATCH", r"/blobs/uploads/", drop_request(after=50_000))
    with httpx.Client(base_url=fault_proxy.url) as client:
        location = client.post(f"/v2/{unique_repo}/blobs/uploads/").headers["Location"]
        with pytest.raises(httpx.RemoteProtocolError):
            client.patch(location, content=data)
        cut = fault_proxy.requests[-1]
        assert (cut.action, cut.request_bytes, cut.status) == ("drop_request", 50_000, None)
        stale = client.get(location)
        assert stale.status_code == 404
        assert stale.json()["errors"][0]["code"] == "BLOB_UPLOAD_INVALID"
        digest = push_blob(client, unique_repo, data)  # a new upload works
    assert digest == sha256(data)


def test_proxy_drop_request_before_forwarding_allows_resume(fault_proxy: FaultProxy,
                                                            unique_repo) -> None:
    """Chunked upload: first PATCH lands, second is cut before any byte reaches the registry;
    the registry then reports the offset and the upload resumes from it."""
    data = os.urandom(120_000)
    fault_proxy.add("PATCH", r"/blobs/uploads/", drop_request(after=10, forward=False), skip=1)
    with httpx.Client(base_url=fault_proxy.url) as client:
        location = client.post(f"/v2/{unique_repo}/blobs/uploads/").headers["Location"]
        first = client.patch(location, content=data[:50_000],
                             headers={"Content-Range": "0-49999"})
        assert first.status_code == 202 and first.headers["Range"] == "0-49999"
        location = first.headers["Location"]
        with pytest.raises(httpx.RemoteProtocolError):
            client.patch(location, content=data[50_000:], headers={"Content-Range": "50000-119999"})
        progress = client.get(location)
        assert progress.status_code == 204 and progress.headers["Range"] == "0-49999"
        # resume from the reported offset, streamed chunked through the proxy
        pieces = (data[i : i + 16_384] for i in range(50_000, len(data), 16_384))
        rest = client.patch(progress.headers["Location"], content=pieces)
        assert rest.status_code == 202 and rest.headers["Range"] == f"0-{len(data) - 1}"
        done = client.put(with_query(rest.headers["Location"], digest=sha256(data)))
        assert done.status_code == 201
        assert client.get(f"/v2/{unique_repo}/blobs/{sha256(data)}").content == data
    chunked = fault_proxy.requests_matching("PATCH")[-1]
    assert chunked.headers.get("transfer-encoding") == "chunked"
    assert chunked.request_bytes == len(data) - 50_000


def test_proxy_lose_response_after_registry_acted(fault_proxy: FaultProxy, registry,
                                                  unique_repo, tmp_path: Path) -> None:
    image = write_tiny_image(tmp_path / "layout")
    with httpx.Client(base_url=fault_proxy.url) as client:
        for digest, data in image.blobs.items():
            if digest != image.manifest_digest:
                push_blob(client, unique_repo, data)
        fault_proxy.add("PUT", r"/manifests/", lose_response())
        with pytest.raises(httpx.RemoteProtocolError):
            client.put(f"/v2/{unique_repo}/manifests/v1", content=image.manifest,
                       headers={"Content-Type": OCI_MANIFEST})
    lost = fault_proxy.requests[-1]
    assert (lost.action, lost.status, lost.upstream_status) == ("lose_response", None, 201)
    got = httpx.get(f"{registry.url}/v2/{unique_repo}/manifests/v1", headers={"Accept": OCI_MANIFEST})
    assert got.content == image.manifest


def test_proxy_status_with_custom_headers(fault_proxy: FaultProxy) -> None:
    fault_proxy.add(None, r"^/v2/$", status(503, retry_after=0.5, headers={"X-Fault": "yes"}))
    resp = httpx.get(f"{fault_proxy.url}/v2/")
    assert (resp.status_code, resp.headers["Retry-After"], resp.headers["X-Fault"]) == (503, "0.5", "yes")
    assert fault_proxy.requests[-1].upstream_status is None  # never reached the registry


def test_proxy_delay_trips_client_timeout(fault_proxy: FaultProxy) -> None:
    fault_proxy.add("GET", r"^/v2/$", delay(1.0))
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(f"{fault_proxy.url}/v2/", timeout=0.3)
    assert httpx.get(f"{fault_proxy.url}/v2/", timeout=5).status_code == 200


def test_proxy_in_front_of_tls_and_token_registries(tls_registry, token_registry) -> None:
    with FaultProxy(tls_registry) as proxy:
        assert httpx.get(f"{proxy.url}/v2/").status_code == 200
    with FaultProxy(token_registry) as proxy:
        challenge = httpx.get(f"{proxy.url}/v2/")
        assert challenge.status_code == 401
        assert token_registry.realm in challenge.headers["WWW-Authenticate"]


def test_proxy_closes_connection_on_cut(fault_proxy: FaultProxy, blob) -> None:
    """Raw socket view: headers + N bytes, then EOF (no keep-alive after a cut)."""
    repo, digest, _ = blob
    fault_proxy.add("GET", r"/blobs/", drop_response(after=1_000))
    with socket.create_connection(("127.0.0.1", fault_proxy.port), timeout=5) as sock:
        sock.sendall(f"GET /v2/{repo}/blobs/{digest} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert len(body) == 1_000


def test_registry_tools_are_installed() -> None:
    """The suite's real components are on PATH (the test command installs them)."""
    assert shutil.which("skopeo"), "install skopeo: apt-get install -y skopeo"
    assert registry_binary()
