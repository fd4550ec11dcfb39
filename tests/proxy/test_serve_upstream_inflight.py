"""serve as a proxy of an upstream Hub: a read that meets a fetch in flight is answered by the rules
a landed read is answered by, and the upstream receives only requests the proxy built from a
checked repository id, commit and file path, never a client's path. The upstream and the proxy:
tests/upstream_proxy.py (its upstream is behind a fault proxy that records every request)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpcore
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import ROOT, serve_over
from support.faultproxy import hold
from upstream_proxy import (
    CLIENT_TOKEN,
    UP_TOKEN,
    Proxied,
    lfs_only,  # noqa: F401 - autouse: every test here over LFS
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SECRET = b"the vault's combination\n"
#: paths a client sends as written (no client-side ``..`` folding): each names, once the proxy's
#: path were followed, a private repository's file, a denied one's, a private model_info, the
#: upstream account behind serve's token
ATTACKS = (
    "/{repo}/resolve/main/../../../../secret/vault/resolve/main/vault.txt",
    "/{repo}/resolve/main/..%2F..%2F..%2F..%2Fsecret%2Fvault%2Fresolve%2Fmain%2Fvault.txt",
    "/{repo}/resolve/main/..%2F..%2F..%2F..%2Fsecret%2Fmodel%2Fresolve%2Fmain%2Fconfig.json",
    "/{repo}/raw/main/../../../../secret/vault/resolve/main/vault.txt",
    "/api/models/{repo}/tree/main/../../../../secret/vault",
    "/api/models/{repo}/tree/main/..%2F..%2F..%2F..%2Fsecret%2Fvault",
    "/api/models/{repo}/tree/main/../../../../../whoami-v2",
    "/api/models/{repo}/revision/main/../../../../../whoami-v2",
)


def raw_get(base: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """``GET path`` sent as written (httpx would fold ``..`` before sending): (status, headers, body)."""
    parts = urlsplit(base)
    url = httpcore.URL(scheme=parts.scheme.encode(), host=(parts.hostname or "").encode(), port=parts.port,
                       target=path.encode())
    sent = {"Authorization": f"Bearer {CLIENT_TOKEN}", "Host": parts.netloc, **(headers or {})}
    answer = httpcore.request("GET", url, headers=list(sent.items()))
    return answer.status, {k.decode().lower(): v.decode() for k, v in answer.headers}, answer.content


@pytest.fixture(scope="module")
def vault(proxied: Proxied) -> None:
    """secret/vault, private at the upstream (the proxy's token reads it: nobody should through it)."""
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("secret/vault", private=True)
    up.upload_file(path_or_fileobj=SECRET, path_in_repo="vault.txt", repo_id="secret/vault")


@pytest.fixture
def held(proxied: Proxied, vault: None, request: pytest.FixtureRequest) -> Iterator[tuple[str, threading.Event]]:
    """A public repository at the upstream whose fetch the test holds in flight (its weights' GET
    kept at the upstream's door until the event is set): (its id, the event)."""
    repo_id = f"acme/held-{request.node.name[-12:].strip('_').replace('_', '-')}"
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo(repo_id)
    up.upload_file(path_or_fileobj=b'{"held": 1}', path_in_repo="config.json", repo_id=repo_id)
    up.upload_file(path_or_fileobj=b"\x07" * 8192, path_in_repo="w.safetensors", repo_id=repo_id)
    release = threading.Event()
    proxied.counted.add("GET", rf"/{repo_id}/resolve/.*/w\.safetensors", hold(release))
    try:
        yield repo_id, release
    finally:
        release.set()


def test_a_path_asked_while_a_fetch_is_in_flight_is_never_forwarded_and_answers_as_once_landed(
        proxied: Proxied, held: tuple[str, threading.Event]):
    repo_id, release = held
    started = raw_get(proxied.proxy, f"/{repo_id}/resolve/main/config.json")  # the fetch begins
    assert started[0] == 200 and started[2] == b'{"held": 1}'
    before = len(proxied.counted.requests)
    in_flight = {attack: raw_get(proxied.proxy, attack.format(repo=repo_id)) for attack in ATTACKS}
    assert proxied.tags(f"proxy/{repo_id}") == []  # every one asked while the commit was in flight
    asked = [r.path for r in proxied.counted.requests[before:]]
    release.set()
    proxied.named_main(f"proxy/{repo_id}", HfApi(endpoint=proxied.upstream, token=UP_TOKEN).model_info(repo_id).sha)
    landed = {attack: raw_get(proxied.proxy, attack.format(repo=repo_id)) for attack in ATTACKS}
    for attack in ATTACKS:
        status, headers, body = in_flight[attack]
        assert status in (400, 404), (attack, status, body[:200])
        assert SECRET not in body and UP_TOKEN.encode() not in body, (attack, body[:200])
        assert (status, headers.get("x-error-code")) == (landed[attack][0], landed[attack][1].get("x-error-code")), \
            (attack, in_flight[attack][:2], landed[attack][:2])
    assert not [p for p in asked if "secret" in p or "whoami" in p or ".." in p], asked
    forwarded = [r for r in proxied.counted.requests[before:] if "secret" in r.path or "whoami" in r.path]
    assert forwarded == [], [(r.path, r.headers.get("authorization")) for r in forwarded]


def test_a_range_past_the_end_is_the_same_416_in_flight_and_landed(proxied: Proxied,
                                                                  held: tuple[str, threading.Event]):
    repo_id, release = held
    assert raw_get(proxied.proxy, f"/{repo_id}/resolve/main/config.json")[0] == 200  # the fetch begins
    past = {"Range": "bytes=4096-"}
    in_flight = raw_get(proxied.proxy, f"/{repo_id}/resolve/main/config.json", past)
    assert proxied.tags(f"proxy/{repo_id}") == []
    release.set()
    proxied.named_main(f"proxy/{repo_id}", HfApi(endpoint=proxied.upstream, token=UP_TOKEN).model_info(repo_id).sha)
    landed = raw_get(proxied.proxy, f"/{repo_id}/resolve/main/config.json", past)
    assert landed[0] == 416
    varying = {"date", "x-request-id"}
    assert in_flight[0] == landed[0]
    assert in_flight[2] == landed[2]
    assert {k: v for k, v in in_flight[1].items() if k not in varying} == \
        {k: v for k, v in landed[1].items() if k not in varying}


def test_a_miss_asks_the_upstream_once_for_its_model_info_its_tree_and_its_commits(proxied: Proxied,
                                                                                  tmp_path: Path):
    """A model loaded by branch name while its fetch is in flight (a file held at the upstream's door,
    another file downloaded meanwhile, model_info asked): the upstream was asked one model_info, one
    tree listing and one commit list for it in all, every later request joining the first's."""
    repo_id = "acme/asked-once"
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo(repo_id)
    up.upload_file(path_or_fileobj=b'{"once": 1}', path_in_repo="config.json", repo_id=repo_id)
    sha = up.upload_file(path_or_fileobj=b"\x09" * 8192, path_in_repo="w.safetensors", repo_id=repo_id).oid
    release = threading.Event()
    proxied.counted.add("GET", rf"/{repo_id}/resolve/.*/w\.safetensors", hold(release))
    refs_before = len(proxied.stored.requests_matching(None, f"/proxy/{repo_id}/manifests/ocibridge-refs"))
    requests_before = len(proxied.counted.requests)

    def load(path: str, folder: str) -> bytes:
        return Path(huggingface_hub.hf_hub_download(repo_id, path, endpoint=proxied.proxy, token=CLIENT_TOKEN,
                                                    cache_dir=tmp_path / folder)).read_bytes()

    try:
        with ThreadPoolExecutor(1) as pool:
            weights = pool.submit(load, "w.safetensors", "w")
            until = time.monotonic() + 60
            while not proxied.counted.requests_matching("GET", rf"/{repo_id}/resolve/.*/w\.safetensors"):
                assert time.monotonic() < until and not weights.done(), "the fetch never began"
                time.sleep(0.05)
            assert load("config.json", "c") == b'{"once": 1}'
            assert proxied.api().model_info(repo_id).sha == sha
            assert proxied.tags(f"proxy/{repo_id}") == []  # all of it while the commit was in flight
            release.set()
            assert weights.result(timeout=120) == b"\x09" * 8192
    finally:
        release.set()
    proxied.named_main(f"proxy/{repo_id}", sha)
    asked = [r.path.split("?")[0] for r in proxied.counted.requests[requests_before:]]
    model_infos = [p for p in asked
                   if p == f"/api/models/{repo_id}" or p.startswith(f"/api/models/{repo_id}/revision/")]
    trees = [p for p in asked if p.startswith(f"/api/models/{repo_id}/tree/")]
    commits = [p for p in asked if p.startswith(f"/api/models/{repo_id}/commits/")]
    refs = len(proxied.stored.requests_matching(None, f"/proxy/{repo_id}/manifests/ocibridge-refs")) - refs_before
    print(f"per miss: model_info {len(model_infos)}, tree {len(trees)}, commits {len(commits)}, "
          f"refs-record reads {refs}; upstream requests {asked}")
    assert (len(model_infos), len(trees), len(commits)) == (1, 1, 1), asked
    assert refs <= 1  # the client's five requests (two HEADs, two GETs, model_info): one read in all


def test_a_proxy_talks_to_its_upstream_through_one_http_client(proxied: Proxied, tmp_path: Path):
    """A proxy of its own over the stand-in upstream, every HTTP client its process makes written
    down (tests/support/clientcount): a model fetched while read (a file, model_info and a tree
    page answered in flight, the rest once landed) is one client, the upstream session's, made
    once at start; huggingface_hub makes none."""
    repo_id = "acme/one-client"
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo(repo_id)
    up.upload_file(path_or_fileobj=b'{"one": 1}', path_in_repo="config.json", repo_id=repo_id)
    sha = up.upload_file(path_or_fileobj=b"\x0b" * 8192, path_in_repo="w.safetensors", repo_id=repo_id).oid
    release = threading.Event()
    proxied.counted.add("GET", rf"/{repo_id}/resolve/.*/w\.safetensors", hold(release))
    made = tmp_path / "clients.txt"
    env = {"PYTHONPATH": f"{ROOT / 'tests' / 'support' / 'clientcount'}{os.pathsep}{ROOT}",
           "OCIBRIDGE_TEST_CLIENTS": str(made), "HF_HUB_DISABLE_XET": "1"}
    flags = ["--upstream", proxied.counted.url, "--upstream-token-file", str(proxied.root / "up-token.txt")]
    (tmp_path / "serve").mkdir()
    try:
        with serve_over(proxied.registry, tmp_path / "serve", f"{CLIENT_TOKEN}\n",
                        lambda host: [f"{host}/one-client", "--plain-http", *flags], **env) as proxy:
            assert raw_get(proxy, f"/{repo_id}/resolve/main/config.json")[2] == b'{"one": 1}'  # in flight
            api = HfApi(endpoint=proxy, token=CLIENT_TOKEN)
            assert api.model_info(repo_id).sha == sha
            assert [f.path for f in api.list_repo_tree(repo_id)] != []
            assert proxied.tags(f"one-client/{repo_id}") == []
            release.set()
            proxied.named_main(f"one-client/{repo_id}", sha)
            assert Path(huggingface_hub.hf_hub_download(repo_id, "w.safetensors", endpoint=proxy, token=CLIENT_TOKEN,
                                                        cache_dir=tmp_path / "hub")).read_bytes() == b"\x0b" * 8192
    finally:
        release.set()
    lines = made.read_text().splitlines()
    toward_upstream = [line for line in lines if " ocibridge.hubserver.upstream" in line
                       or " ocibridge.kinds.hf" in line or " huggingface_hub" in line or line.startswith("httpx2")]
    assert toward_upstream == ["httpx.Client ocibridge.hubserver.upstream.session"], lines
