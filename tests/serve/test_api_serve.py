"""``serve`` from Python (issue 51): the app made in-process by ``ocibridge.create_app`` over a
layout and over a registry, answered under Starlette's test client as huggingface_hub asks; mounted
in another application; the route table's corner cases; and the extra named when it is missing."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

import ocibridge
from ocibridge.oci.reference import RegistryReference
from ocibridge.signing.containers_policy import UsePolicy
from ocibridge.stores.layout import LayoutStore

WEIGHTS = bytes(range(256)) * 4096  # 1 MiB


def write_tiny_files(root: Path) -> dict[str, bytes]:
    files = {"config.json": b'{"model_type": "bert"}\n', "model.safetensors": WEIGHTS,
             "extra/notes.md": b"# tiny\n"}
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


@pytest.fixture
def layout(tmp_path) -> tuple[str, str, dict[str, bytes]]:
    """oci:DIR holding acme/tiny:latest; its commit id; its files."""
    files = write_tiny_files(tmp_path / "tiny")
    LayoutStore(tmp_path / "lay", create=True)  # there: oci:DIR:NAME:TAG names a model in it
    pushed = ocibridge.push(str(tmp_path / "tiny"), f"oci:{tmp_path}/lay:acme/tiny:latest")
    return f"oci:{tmp_path}/lay", pushed.descriptor.digest.split(":")[1][:40], files


def test_model_info_and_a_download_from_a_layout(layout):
    source, commit, files = layout
    with TestClient(ocibridge.create_app(source)) as client:
        info = client.get("/api/models/acme/tiny")
        assert info.status_code == 200
        assert info.json()["id"] == "acme/tiny" and info.json()["sha"] == commit
        assert sorted(s["rfilename"] for s in info.json()["siblings"]) == sorted(files)
        got = client.get("/acme/tiny/resolve/main/model.safetensors")
        assert got.content == WEIGHTS and got.headers["x-repo-commit"] == commit
        assert got.headers["etag"] == f'"{hashlib.sha256(WEIGHTS).hexdigest()}"'
        part = client.get("/acme/tiny/resolve/main/model.safetensors", headers={"Range": "bytes=256-511"})
        assert part.status_code == 206 and part.content == WEIGHTS[256:512]
        assert client.get("/acme/tiny/resolve/main/extra/notes.md").content == files["extra/notes.md"]


def test_model_info_and_a_download_from_a_registry(tmp_path, registry, unique_repo):
    """A typed registry prefix, the registry options, read tokens and the policy value pull takes."""
    files = write_tiny_files(tmp_path / "tiny")
    pushed = ocibridge.push(str(tmp_path / "tiny"), f"{registry.host}/{unique_repo}/acme/tiny:v1")
    app = ocibridge.create_app(
        [RegistryReference(registry.host, unique_repo)],
        options=ocibridge.ServeOptions(default_tag="v1", tokens=("t0ken",)),
        transfer=ocibridge.TransferOptions(concurrency=2),
        verify=UsePolicy())  # the containers policy file found (the tests': accept anything)
    auth = {"Authorization": "Bearer t0ken"}
    with TestClient(app) as client:
        assert client.get("/api/models/acme/tiny").status_code == 401
        info = client.get("/api/models/acme/tiny", headers=auth).json()
        assert info["sha"] == pushed.descriptor.digest.split(":")[1][:40]
        assert sorted(s["rfilename"] for s in info["siblings"]) == sorted(files)
        got = client.get("/acme/tiny/resolve/main/model.safetensors", headers=auth)
        assert got.status_code == 200 and got.content == WEIGHTS
        missing = client.get("/acme/tiny/resolve/nope/config.json", headers=auth)
        assert missing.status_code == 404 and missing.headers["x-error-code"] == "RevisionNotFound"


def test_mounted_in_another_application(layout):
    """Under a prefix of an existing service: its URLs, the Xet ones and their signatures included."""
    source, commit, _ = layout
    hub = ocibridge.create_app(source, options=ocibridge.ServeOptions(xet_min_size=1024))
    host = Starlette(routes=[Mount("/hub", app=hub)])
    with TestClient(host) as client:
        assert client.get("/hub/api/models/acme/tiny").json()["sha"] == commit
        head = client.head("/hub/acme/tiny/resolve/main/model.safetensors")
        assert head.status_code == 200 and head.headers["content-length"] == str(len(WEIGHTS))
        route = head.headers["x-xet-refresh-route"]
        assert route == f"http://testserver/hub/api/models/acme/tiny/xet-read-token/{commit}"
        grant = client.get(route)
        cas, token = grant.headers["x-xet-cas-url"], grant.headers["x-xet-access-token"]
        assert cas == f"http://testserver/hub/xet/{commit}/acme/tiny"
        plan = client.get(f"{cas}/v2/reconstructions/{head.headers['x-xet-hash']}",
                          headers={"Authorization": f"Bearer {token}"})
        url = next(iter(plan.json()["xorbs"].values()))[0]["url"]
        assert client.get(url, headers={"Range": "bytes=0-7"}).status_code == 206  # the signature holds
    hub.state.serve.close()


# (method, path, token sent) -> (status, X-Error-Code, error message or None): the router's corners,
# as the hand-written routers before it answered them
ROUTES = [
    ("GET", "/api/models/acme/tiny/", True, 200, None, None),  # a trailing "/" is dropped
    ("HEAD", "/api/models/acme/tiny", True, 404, None, None),  # the API's JSON routes are GET only
    ("GET", "/api/models/acme/tiny/revision/refs%2Fpr%2F1", True, 404, "RevisionNotFound",
     "acme/tiny: no revision refs/pr/1"),  # a quoted "/" stays in its segment
    ("GET", "/api/models/acme/tiny/tree/main/extra", True, 200, None, None),
    ("GET", "/api/models/acme/tiny/tree/main/none", True, 404, "EntryNotFound", "acme/tiny@main: no directory none"),
    ("GET", "/api/models/acme/tiny/revision", True, 404, None, "no such route: /api/models/acme/tiny/revision"),
    ("GET", "/api/models/acme/tree", True, 404, None, "no such route: /api/models/acme/tree"),  # a route's word
    ("GET", "/api/models/acme/tiny/x", True, 404, None, "no such route: /api/models/acme/tiny/x"),
    ("GET", "/api/models/resolve/main/config.json", True, 404, None,
     "no such route: /api/models/resolve/main/config.json"),  # never read as a download
    ("GET", "/acme/tiny/resolve/main/absent", True, 404, "EntryNotFound", "acme/tiny@main: no file absent"),
    ("GET", "/solo/resolve/main/config.json", True, 404, "RepoNotFound", None),
    ("PUT", "/acme/tiny/resolve/main/config.json", True, 405, None, None),
    ("GET", "/no/where/at/all", False, 401, None, "no token was sent: this server wants 'Authorization: Bearer "
     "TOKEN' (huggingface_hub: HF_TOKEN or token=)"),
    ("GET", "/no/where/at/all", True, 404, None, "no such route: /no/where/at/all"),
    # /NAME and /ORG/NAME are the Hub's model pages (issue 56): a page, behind its login (a cookie, not the bearer)
    ("GET", "/nowhere", True, 200, None, None),  # the login form (the client follows the redirect)
    ("POST", "/nowhere", True, 404, None, "no such route: /nowhere"),  # pages are GET and HEAD only
    ("GET", "/xet/abc", False, 404, None, "no such route: /xet/abc"),  # Xet's paths need no read token
    ("GET", "/xet/a/acme/tiny/v3/reconstructions/x", False, 404, None,
     "no such route: /xet/a/acme/tiny/v3/reconstructions/x"),
    ("GET", "/xet/a/acme/tiny/xorbs/ab/1x/0", False, 404, None, "no such route: /xet/a/acme/tiny/xorbs/ab/1x/0"),
    ("GET", "/healthz", False, 200, None, None),
]


@pytest.mark.parametrize(("method", "path", "token", "status", "code", "message"), ROUTES)
def test_the_routes_corners(layout, method, path, token, status, code, message):
    source, _, _ = layout
    app = ocibridge.create_app(source, options=ocibridge.ServeOptions(tokens=("t0ken",)))
    with TestClient(app) as client:
        r = client.request(method, path, headers={"Authorization": "Bearer t0ken"} if token else {})
    assert (r.status_code, r.headers.get("x-error-code")) == (status, code)
    if message is not None:
        assert r.json() == {"error": message}


def test_a_broken_policy_file_is_an_error_at_once(layout, tmp_path):
    source, _, _ = layout
    (tmp_path / "policy.json").write_text("{")
    with pytest.raises(ocibridge.OcibridgeError, match="policy.json"):
        ocibridge.create_app(source, verify=UsePolicy(file=str(tmp_path / "policy.json")))


def test_usage_mistakes_are_named(layout):
    source, _, _ = layout
    with pytest.raises(ocibridge.OcibridgeError, match="--public-url"):
        ocibridge.create_app(source, options=ocibridge.ServeOptions(public_url="ftp://x"))
    with pytest.raises(ocibridge.OcibridgeError, match="a whole layout"):
        ocibridge.create_app(f"{source}:acme/tiny:latest")
    with pytest.raises(ocibridge.OcibridgeError, match="--listen"):
        ocibridge.serve(source, listen="nowhere")
    with pytest.raises(ocibridge.OcibridgeError, match="--cert and --key"):
        ocibridge.serve(source, listen=ocibridge.ListenOptions(cert="c.pem"))


def test_the_extra_is_named_when_starlette_is_missing(monkeypatch, layout):
    monkeypatch.setitem(sys.modules, "starlette", None)
    with pytest.raises(ocibridge.OcibridgeError, match=r"pip install 'ocibridge\[serve\]'"):
        ocibridge.create_app(layout[0])


def test_importing_the_api_loads_no_server():
    code = ("import sys, ocibridge.api.serve, json; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []


def test_the_extra_is_named_when_a_pages_package_is_missing(monkeypatch, layout):
    monkeypatch.setitem(sys.modules, "jinja2", None)
    with pytest.raises(ocibridge.OcibridgeError, match=r"pip install 'ocibridge\[serve\]'"):
        ocibridge.create_app(layout[0])
