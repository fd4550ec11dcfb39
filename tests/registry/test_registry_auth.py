"""Registry auth for real: htpasswd Basic, distribution's token auth, TLS, docker config, login."""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import certifi
import httpx
import pytest
from support.ocilayout import write_tiny_image

from ocibridge.errors import RegistryError
from ocibridge.oci.models import Descriptor
from ocibridge.oci.reference import parse_registry_reference
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry import get_credentials, login, logout, open_repository
from ocibridge.stores.registry.auth import Token, parse_challenge, scope_key
from ocibridge.stores.registry.client import ClientOptions, base_url, is_loopback
from ocibridge.transfer.copy import copy


def _store(reg, repo: str, **options):
    return open_repository(parse_registry_reference(f"{reg.host}/{repo}:x"), **options)


def _tiny(tmp_path, text: str = "hello"):
    image = write_tiny_image(tmp_path / f"tiny-{uuid.uuid4().hex[:6]}",
                             {"hello.txt": text.encode()})
    return LayoutStore(image.path), image


def _repo(prefix: str) -> str:
    return f"{prefix}/{uuid.uuid4().hex[:8]}"


# -- parsing and scheme choice ------------------------------------------------------------------
def test_parse_challenge():
    c = parse_challenge('Bearer realm="https://auth.example/token",service="reg",'
                        'scope="repository:a/b:pull,push",error="insufficient_scope"')
    assert c.scheme == "bearer"
    assert c.params == {"realm": "https://auth.example/token", "service": "reg",
                        "scope": "repository:a/b:pull,push", "error": "insufficient_scope"}
    assert parse_challenge('Basic realm="x"').scheme == "basic"
    assert scope_key(["b", "a", "a"]) == "a b"


def test_scheme_choice():
    assert is_loopback("127.0.0.1:5000") and is_loopback("localhost") and is_loopback("[::1]:5000")
    assert not is_loopback("registry.example:5000")
    assert base_url("127.0.0.1:5000", ClientOptions()) == "http://127.0.0.1:5000"
    assert base_url("localhost:5000", ClientOptions(ca_file="/x")) == "https://localhost:5000"
    assert base_url("reg.example", ClientOptions()) == "https://reg.example"
    assert base_url("reg.example", ClientOptions(plain_http=True)) == "http://reg.example"
    assert base_url("docker.io", ClientOptions()) == "https://registry-1.docker.io"


# -- Basic ----------------------------------------------------------------------------------------
def test_basic_auth_push_pull(auth_registry, tmp_path):
    layout, image = _tiny(tmp_path)
    repo = _repo("basic")
    with pytest.raises(RegistryError) as err, \
         _store(auth_registry, repo, docker_config=str(tmp_path / "none")) as anon:
        copy(layout, image.tag, anon, "v1")
    assert err.value.status == 401 and err.value.code == "UNAUTHORIZED"
    with _store(auth_registry, repo, username=auth_registry.username,
                password=auth_registry.password) as store:
        copy(layout, image.tag, store, "v1")
        assert store.resolve("v1").digest == image.manifest_digest
    with pytest.raises(RegistryError) as err:
        _store(auth_registry, repo, username=auth_registry.username, password="wrong").resolve("v1")
    assert err.value.code == "UNAUTHORIZED"


# -- token auth ---------------------------------------------------------------------------------
def test_token_scopes_per_operation_and_mount(token_registry, tmp_path):
    ts = token_registry.token_server
    layout, image = _tiny(tmp_path)
    src_repo, dst_repo = _repo("team"), _repo("team")
    creds = {"username": token_registry.username, "password": token_registry.password}
    ts.clear()
    with _store(token_registry, src_repo, **creds) as src:
        copy(layout, image.tag, src, "v1")
    asked = {scope for r in ts.requests for scope in r.scopes}
    assert asked == {f"repository:{src_repo}:pull", f"repository:{src_repo}:pull,push"}
    # one token per scope set, reused across the blobs: not one per request
    assert len(ts.requests) <= 3
    assert all(r.account == "alice" for r in ts.requests)

    ts.clear()
    with _store(token_registry, src_repo, **creds) as src, \
         _store(token_registry, dst_repo, **creds) as dst:
        stats = copy(src, "v1", dst, "v1")
        assert stats.blobs_mounted == 2 and dst.stats.bytes_uploaded == 0
    mount_requests = [r for r in ts.requests if len(r.scopes) == 2]
    assert mount_requests, ts.requests
    assert set(mount_requests[0].scopes) == {f"repository:{dst_repo}:pull,push",
                                             f"repository:{src_repo}:pull"}
    assert set(mount_requests[0].granted) == set(mount_requests[0].scopes)


def test_refused_mount_falls_back_to_upload(token_registry, tmp_path):
    """carol may push to team/* but not read vault/*: the registry refuses the mount (the
    token server leaves the source scope out), and the copy streams the blobs instead."""
    from support.token_registry import RW
    from support.token_server import User

    token_registry.users.setdefault("carol", User("carol-secret", [("team/*", RW)]))
    layout, image = _tiny(tmp_path)
    vault, team = _repo("vault"), _repo("team")
    admin = {"username": "admin", "password": token_registry.password_of("admin")}
    carol = {"username": "carol", "password": "carol-secret"}
    with _store(token_registry, vault, **admin) as src:
        copy(layout, image.tag, src, "v1")
    ts = token_registry.token_server
    ts.clear()
    with _store(token_registry, vault, **admin) as src, _store(token_registry, team, **carol) as dst:
        stats = copy(src, "v1", dst, "v1")
        assert stats.blobs_mounted == 0 and stats.blobs_copied == 2
        assert dst.stats.bytes_uploaded == src.stats.bytes_downloaded > 0
        assert dst.resolve("v1").digest == image.manifest_digest
    mounts = [r for r in ts.requests if r.account == "carol" and f"repository:{vault}:pull" in r.scopes]
    assert mounts and all(f"repository:{vault}:pull" not in r.granted for r in mounts)
    out = LayoutStore(tmp_path / "out", create=True)
    with _store(token_registry, team, **carol) as back:
        copy(back, "v1", out, "v1")
    assert out.resolve("v1").digest == image.manifest_digest


def test_token_denied_push_and_anonymous_pull(token_registry, tmp_path):
    layout, image = _tiny(tmp_path)
    bob = {"username": "bob", "password": token_registry.password_of("bob")}
    with pytest.raises(RegistryError) as err, _store(token_registry, _repo("team"), **bob) as s:
        copy(layout, image.tag, s, "v1")
    assert err.value.status == 401
    assert "refused writing to team/" in str(err.value)
    # anonymous tokens: public/* is pullable without credentials
    admin = {"username": "admin", "password": token_registry.password_of("admin")}
    public = _repo("public")
    with _store(token_registry, public, **admin) as s:
        copy(layout, image.tag, s, "v1")
    ts = token_registry.token_server
    ts.clear()
    out = LayoutStore(tmp_path / "out", create=True)
    with _store(token_registry, public, docker_config=str(tmp_path / "empty")) as anon:
        copy(anon, "v1", out, "v1")
    assert out.resolve("v1").digest == image.manifest_digest
    assert ts.requests and all(r.account is None for r in ts.requests)


def test_token_renewed_on_expiry_and_on_401(token_registry, tmp_path):
    ts = token_registry.token_server
    layout, image = _tiny(tmp_path)
    repo = _repo("team")
    creds = {"username": token_registry.username, "password": token_registry.password}
    old = ts.expires_in
    ts.expires_in = 2
    try:
        with _store(token_registry, repo, **creds) as store:
            copy(layout, image.tag, store, "v1")
            ts.clear()
            desc = store.resolve("v1")
            assert len(ts.requests) == 0  # the pull token is still fresh
            time.sleep(2.1)
            assert store.resolve("v1") == desc
            assert len(ts.requests) == 1  # renewed because it expired
            # a token the registry refuses (revoked, clock skew): the 401 renews it
            key = scope_key([f"repository:{repo}:pull"])
            store.client.auth._tokens[key] = Token("not-a-jwt", time.monotonic() + 3600)
            ts.clear()
            assert store.resolve("v1") == desc
            assert len(ts.requests) == 1
    finally:
        ts.expires_in = old


# -- TLS ----------------------------------------------------------------------------------------
def test_tls_with_ca_file(tls_registry, tmp_path):
    layout, image = _tiny(tmp_path)
    repo = _repo("tls")
    with _store(tls_registry, repo, ca_file=str(tls_registry.ca_file)) as store:
        assert store.client.base.startswith("https://")
        copy(layout, image.tag, store, "v1")
        assert store.resolve("v1").digest == image.manifest_digest
    # another CA: the certificate is refused (https, not a silent downgrade), without retries
    with pytest.raises(RegistryError) as err:
        _store(tls_registry, repo, ca_file=certifi.where(), max_retries=0).resolve("v1")
    assert "certificate" in str(err.value).lower()
    with _store(tls_registry, repo, insecure=True) as store:
        assert store.client.base.startswith("https://")
        assert store.resolve("v1").digest == image.manifest_digest
    # plain http against the TLS port fails: nothing is sent in the clear by surprise
    with pytest.raises(RegistryError):
        _store(tls_registry, repo, max_retries=0).resolve("v1")


# -- credentials --------------------------------------------------------------------------------
def _write_config(directory, config: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))


def _helper(tmp_path, monkeypatch) -> tuple:
    """A `docker-credential-test` program on PATH that keeps secrets in a JSON file."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    db = tmp_path / "helper-db.json"
    script = bindir / "docker-credential-test"
    script.write_text(f"""#!{sys.executable}
import json, sys
db = {str(db)!r}
try:
    data = json.load(open(db))
except FileNotFoundError:
    data = {{}}
action = sys.argv[1]
payload = sys.stdin.read()
if action == "get":
    key = payload.strip()
    if key not in data:
        print("credentials not found in native keychain")
        sys.exit(1)
    print(json.dumps({{"ServerURL": key, "Username": data[key][0], "Secret": data[key][1]}}))
elif action == "store":
    item = json.loads(payload)
    data[item["ServerURL"]] = [item["Username"], item["Secret"]]
elif action == "erase":
    data.pop(payload.strip(), None)
json.dump(data, open(db, "w"))
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return db


def test_docker_config_auths_and_helpers(auth_registry, tmp_path, monkeypatch):
    host, user, pw = auth_registry.host, auth_registry.username, auth_registry.password
    layout, image = _tiny(tmp_path)
    repo = _repo("cfg")
    # auths with base64 "auth", found through DOCKER_CONFIG
    conf = tmp_path / "docker"
    _write_config(conf, {"auths": {host: {"auth": base64.b64encode(f"{user}:{pw}".encode()).decode()}}})
    monkeypatch.setenv("DOCKER_CONFIG", str(conf))
    with _store(auth_registry, repo) as store:
        copy(layout, image.tag, store, "v1")
    # credHelpers win over auths
    db = _helper(tmp_path, monkeypatch)
    db.write_text(json.dumps({host: [user, pw]}))
    _write_config(conf, {"auths": {host: {"auth": base64.b64encode(b"x:wrong").decode()}},
                         "credHelpers": {host: "test"}})
    assert get_credentials(host).password == pw
    with _store(auth_registry, repo) as store:
        assert store.resolve("v1").digest == image.manifest_digest
    # credsStore for hosts without an entry
    _write_config(conf, {"credsStore": "test"})
    assert get_credentials(host).username == user
    assert get_credentials("other.example") is None
    # docker.io uses the index URL key
    _write_config(conf, {"auths": {"https://index.docker.io/v1/": {"username": "u", "password": "p"}}})
    assert get_credentials("docker.io").username == "u"


def test_identity_token_from_docker_config(token_registry, tmp_path, monkeypatch):
    """An ``identitytoken`` (what `docker login` keeps for OAuth registries) is a refresh token:
    tokens are then asked by POST grant_type=refresh_token."""
    ts = token_registry.token_server
    conf = tmp_path / "docker"
    _write_config(conf, {"auths": {token_registry.host: {
        "identitytoken": ts.new_refresh_token("alice")}}})
    monkeypatch.setenv("DOCKER_CONFIG", str(conf))
    layout, image = _tiny(tmp_path)
    ts.clear()
    with _store(token_registry, _repo("team")) as store:
        copy(layout, image.tag, store, "v1")
        assert store.resolve("v1").digest == image.manifest_digest
    assert ts.requests and {(r.method, r.account, r.status) for r in ts.requests} == {
        ("POST", "alice", 200)}


def test_login_logout(auth_registry, tmp_path, monkeypatch):
    host, user, pw = auth_registry.host, auth_registry.username, auth_registry.password
    conf = tmp_path / "docker"
    monkeypatch.setenv("DOCKER_CONFIG", str(conf))
    with pytest.raises(RegistryError) as err:
        login(host, user, "wrong")
    assert err.value.code == "UNAUTHORIZED"
    assert not (conf / "config.json").exists()
    path = login(host, user, pw)
    entry = json.loads(path.read_text())["auths"][host]
    assert base64.b64decode(entry["auth"]).decode() == f"{user}:{pw}"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert get_credentials(host).password == pw
    assert logout(host) is True
    assert get_credentials(host) is None
    assert logout(host) is False
    # with a credsStore configured, the secret goes to the helper, not into config.json
    db = _helper(tmp_path, monkeypatch)
    _write_config(conf, {"credsStore": "test", "auths": {}})
    login(host, user, pw)
    assert json.loads(db.read_text()) == {host: [user, pw]}
    assert "auth" not in json.dumps(json.loads((conf / "config.json").read_text())["auths"])
    assert get_credentials(host).password == pw
    assert logout(host) is True
    assert json.loads(db.read_text()) == {}


def test_login_token_registry(token_registry, tmp_path):
    path = login(token_registry.host, "alice", token_registry.password, directory=tmp_path)
    assert token_registry.host in json.loads(path.read_text())["auths"]
    with pytest.raises(RegistryError):
        login(token_registry.host, "alice", "nope", directory=tmp_path / "b")


# -- credentials never leave the registry's host -------------------------------------------------
class _Recorder(ThreadingHTTPServer):
    daemon_threads = True


def _serve(handler) -> tuple[_Recorder, int]:
    server = _Recorder(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, server.server_address[1]


def test_authorization_not_sent_on_cross_host_redirect(auth_registry, tmp_path):
    """A front that redirects blob GETs to a 'storage' host, like S3-backed registries do."""
    layout, image = _tiny(tmp_path, "redirected")
    repo = _repo("redir")
    user, pw = auth_registry.username, auth_registry.password
    with _store(auth_registry, repo, username=user, password=pw) as store:
        copy(layout, image.tag, store, "v1")
    seen: dict[str, list] = {"front": [], "storage": []}
    basic = "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()

    class Storage(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            seen["storage"].append(dict(self.headers))
            digest = self.path.rsplit("/", 1)[1]
            data = image.blobs[digest]
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    storage, storage_port = _serve(Storage)

    class Front(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            seen["front"].append((self.path, self.headers.get("Authorization")))
            if "/blobs/" in self.path:
                digest = self.path.rsplit("/", 1)[1]
                self.send_response(307)
                self.send_header("Location", f"http://localhost:{storage_port}/store/{digest}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            upstream = httpx.get(auth_registry.url + self.path, headers={
                "Authorization": self.headers.get("Authorization", ""),
                "Accept": self.headers.get("Accept", "*/*")})
            self.send_response(upstream.status_code)
            for k in ("Content-Type", "Docker-Content-Digest", "WWW-Authenticate"):
                if k in upstream.headers:
                    self.send_header(k, upstream.headers[k])
            self.send_header("Content-Length", str(len(upstream.content)))
            self.end_headers()
            self.wfile.write(upstream.content)

        do_HEAD = do_GET

    front, front_port = _serve(Front)
    try:
        out = LayoutStore(tmp_path / "out", create=True)
        with open_repository(host=f"127.0.0.1:{front_port}", repository=repo,
                             username=user, password=pw) as via:
            copy(via, "v1", out, "v1")
        assert out.resolve("v1").digest == image.manifest_digest
        blob_gets = [a for p, a in seen["front"] if "/blobs/" in p]
        assert blob_gets and all(a == basic for a in blob_gets)  # the registry got it
        assert len(seen["storage"]) == 2  # config + layer came from storage
        assert all("Authorization" not in h for h in seen["storage"])  # storage never did
    finally:
        front.shutdown()
        storage.shutdown()


def test_thread_safe_shared_token_cache(token_registry, tmp_path):
    """Eight threads pulling at once through one store take one token, not eight."""
    layout, image = _tiny(tmp_path)
    repo = _repo("team")
    creds = {"username": token_registry.username, "password": token_registry.password}
    with _store(token_registry, repo, **creds) as store:
        copy(layout, image.tag, store, "v1")
    ts = token_registry.token_server
    with _store(token_registry, repo, **creds) as store:
        store.resolve("v1")  # learn the challenge
        ts.clear()
        layer = Descriptor(mediaType="x", digest=next(d for d in image.blobs
                                                      if image.blobs[d] is not image.manifest),
                           size=0)
        layer = layer.model_copy(update={"size": len(image.blobs[layer.digest])})
        errors = []

        def pull():
            try:
                with store.open_blob(layer) as r:
                    assert r.read() == image.blobs[layer.digest]
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=pull) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert len(ts.requests) == 0  # the pull token from resolve() is shared


def test_basic_auth_mirror_four_artifacts_in_parallel_passes_every_time(auth_registry, tmp_path, monkeypatch):
    """Parallel first requests to a Basic-auth registry all come back 401: each must retry with
    the credentials, not only the first one (a mirror used to fail about one artifact in three)."""
    import json as _json

    from ocibridge.mirror import load_job, run_job
    from tests.mirror.test_mirror_units import push_models

    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-docker-config"))
    src = LayoutStore(tmp_path / "src", create=True)
    tags = ["a", "b", "c", "d"]
    push_models(src, tags)
    for run in range(3):
        repo = _repo(f"mirror-basic-{run}")
        job = tmp_path / f"job-{run}.json"
        job.write_text(_json.dumps({
            "registries": {auth_registry.host: {"username": auth_registry.username,
                                                "password": auth_registry.password}},
            "defaults": {"concurrency": {"artifacts": 4, "blobs": 4}},
            "sync": [{"source": "oci:src", "target": f"{auth_registry.host}/{repo}"}],
        }))
        summary = run_job(load_job(job))
        failed = [(a.source, a.reason) for a in summary.with_status("failed")]
        assert failed == [] and len(summary.with_status("copied")) == 4, failed


def test_containers_auth_json_and_authfile(auth_registry, tmp_path, monkeypatch):
    """podman/skopeo logins live in containers' auth.json: read after the docker config
    ($REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json); --authfile FILE before both."""
    from ocibridge.cli import main

    _, image = _tiny(tmp_path)
    auth = base64.b64encode(f"{auth_registry.username}:{auth_registry.password}".encode()).decode()
    entry = json.dumps({"auths": {auth_registry.host: {"auth": auth}}})
    wrong = json.dumps({"auths": {auth_registry.host: {
        "auth": base64.b64encode(f"{auth_registry.username}:wrong".encode()).decode()}}})
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "empty-docker"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    runtime = tmp_path / "run"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    ref = f"{auth_registry.host}/{_repo('authjson')}:v1"
    src = f"oci:{image.path}:{image.tag}"

    assert main(["copy", src, ref, "-q"]) == 1  # nothing anywhere: anonymous, refused

    (runtime / "containers").mkdir(parents=True)
    (runtime / "containers" / "auth.json").write_text(entry)  # where `podman login` writes
    assert main(["copy", src, ref, "-q"]) == 0

    (runtime / "containers" / "auth.json").unlink()
    (tmp_path / "skopeo-auth.json").write_text(entry)
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(tmp_path / "skopeo-auth.json"))
    assert main(["resolve", ref]) == 0

    (tmp_path / "wrong.json").write_text(wrong)  # --authfile comes first: its wrong password is used
    assert main(["resolve", ref, "--authfile", str(tmp_path / "wrong.json")]) == 1
    assert main(["resolve", ref, "--authfile", str(tmp_path / "missing.json")]) == 1


def test_refusals_name_the_command_and_whether_credentials_were_sent(auth_registry, tmp_path, monkeypatch, capsys):
    from ocibridge.cli import main

    _, image = _tiny(tmp_path)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "empty-docker"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    src, ref = f"oci:{image.path}:{image.tag}", f"{auth_registry.host}/{_repo('msg')}:v1"

    assert main(["push", src, ref, "-q"]) == 1
    err = capsys.readouterr().err
    assert "(push: no credentials were sent; log in with 'ocibridge login HOST'" in err and "pull" not in err

    assert main(["push", src, ref, "-q", "-u", auth_registry.username, "-p", "wrong"]) == 1
    err = capsys.readouterr().err
    assert "(push: the registry refused the credentials that were sent)" in err and "log in" not in err

    assert main(["login", auth_registry.host, "-u", auth_registry.username, "-p", "wrong"]) == 1
    err = capsys.readouterr().err
    assert "the registry refused the credentials" in err and "log in with" not in err
