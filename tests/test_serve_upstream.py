"""serve as a proxy of an upstream Hub (issue 87, ``serve REG/PREFIX --upstream URL``), against
real processes: the upstream is another ``ocibridge serve`` over its own registry prefix, holding
models published with huggingface_hub, behind a counting fault proxy; the proxy is ``ocibridge
serve`` over a second prefix of the same registry. Clients are huggingface_hub's own."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import (
    ROOT,
    files_of,
    make_model,
    own_registry_and_serve,
    point_hub_at,
    received_until_cut,
    serve_as_process,
    serve_over,
)
from signing_keys import key_pair
from support.faultproxy import FaultProxy, corrupt, delay, drop_response, server_error, throttle
from support.registry import RegistryProcess

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

UP_TOKEN = "up-token"  # the upstream's: only the proxy has it
CLIENT_TOKEN = "client-token"  # the proxy's readers': never sent upstream
ACCEPT = "application/vnd.oci.image.manifest.v1+json"


@dataclass
class Proxied:
    upstream: str  # the upstream serve, straight
    counted: FaultProxy  # in front of it: what the proxy asks the upstream
    proxy: str
    stored: FaultProxy  # in front of the registry: what the proxy asks it
    registry: RegistryProcess
    root: Path
    main: str  # acme/tiny's commit ids at the upstream
    dev: str
    model: Path  # acme/tiny's files at main

    def api(self) -> HfApi:
        return HfApi(endpoint=self.proxy, token=CLIENT_TOKEN)

    def digest(self, repository: str, tag: str) -> str | None:
        answer = httpx.head(f"{self.registry.url}/v2/{repository}/manifests/{tag}", headers={"Accept": ACCEPT})
        return answer.headers.get("docker-content-digest") if answer.status_code == 200 else None

    def tags(self, repository: str) -> list[str]:
        answer = httpx.get(f"{self.registry.url}/v2/{repository}/tags/list")
        return list(answer.json().get("tags") or []) if answer.status_code == 200 else []

    def asked(self, needle: str) -> list[str]:
        return [r.path for r in self.counted.requests if needle in r.path]

    def landed(self, repository: str, *commits: str, timeout: float = 60) -> list[str]:
        """The repository's tags once every commit's upstream tag is there: a commit lands in the
        registry just after its last file streamed to the readers."""
        wanted = {f"ocibridge-upstream-{c}" for c in commits}
        until = time.monotonic() + timeout
        while not wanted <= set(tags := self.tags(repository)):
            assert time.monotonic() < until, f"{repository}: {wanted - set(tags)} never landed"
            time.sleep(0.1)
        return tags

    def named_main(self, repository: str, commit: str, timeout: float = 60) -> None:
        """Once ``commit`` landed and main names it (its default tag, moved just after it landed):
        a read of main resolves here, asking the upstream nothing."""
        until = time.monotonic() + timeout
        while "latest" not in self.landed(repository, commit, timeout=timeout):
            assert time.monotonic() < until, f"{repository}: main never tagged"
            time.sleep(0.1)

    def outcomes(self, repository: str) -> list[str]:
        audit = [json.loads(line) for line in (self.root / "audit.jsonl").read_text().splitlines()]
        return [e["outcome"] for e in audit if e["action"] == "upstream_ingest" and e["repository"] == repository]

    def ended(self, repository: str, count: int, timeout: float = 60) -> list[str]:
        """The repository's ingest outcomes once ``count`` fetches of it ended."""
        until = time.monotonic() + timeout
        while len(said := self.outcomes(repository)) < count:
            assert time.monotonic() < until, f"{repository}: {said}"
            time.sleep(0.1)
        return said


def settled_refs(api: HfApi, repo_id: str, names: int, timeout: float = 30) -> Any:
    """list_repo_refs once it lists ``names`` refs: a fetched name is recorded and tagged by the
    fetch's thread just after its commit landed."""
    until = time.monotonic() + timeout
    while len((refs := refs_or_none(api, repo_id)).branches) + len(refs.tags) < names:
        assert time.monotonic() < until, refs
        time.sleep(0.1)
    return refs


def publish(up: str, root: Path) -> tuple[str, str, Path]:
    """acme/tiny (main, a branch dev one commit ahead, a tag v1), acme/pickled (a .bin),
    acme/other and secret/model at the upstream; (main's commit, dev's commit, main's files)."""
    api = HfApi(endpoint=up, token=UP_TOKEN)
    model = make_model(root / "tiny")
    api.create_repo("acme/tiny")
    main = api.upload_folder(repo_id="acme/tiny", folder_path=model).oid
    api.create_branch("acme/tiny", branch="dev", revision=main)
    dev = api.upload_file(path_or_fileobj=b"dev only\n", path_in_repo="DEV.md", repo_id="acme/tiny",
                          revision="dev").oid
    api.create_tag("acme/tiny", tag="v1", revision=main)
    for repo, files in (("acme/pickled", {"config.json": b"{}", "pytorch_model.bin": b"\x80\x04pickle"}),
                        ("acme/other", {"config.json": b"{\"other\": 1}", "w.safetensors": b"\x00" * 4096}),
                        ("secret/model", {"config.json": b"{}"})):
        api.create_repo(repo)
        for path, data in files.items():
            api.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=repo)
    return main, dev, model


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxied]:
    root = tmp_path_factory.mktemp("upstream")
    (root / "up-token.txt").write_text(UP_TOKEN + "\n")
    (root / "proxy").mkdir()
    with own_registry_and_serve(root / "up", f"{UP_TOKEN} write\n", lambda host: [f"{host}/up", "--plain-http"]) \
            as (up, registry), FaultProxy(up) as counted, FaultProxy(registry) as stored:
        main, dev, model = publish(up, root)
        key, _ = key_pair(root / "keys")
        flags = ["--upstream", counted.url, "--upstream-token-file", str(root / "up-token.txt"),
                 "--upstream-deny", "secret/*", "--audit-log", str(root / "audit.jsonl"),
                 "--sign-key", str(key), "--provenance"]
        with serve_over(registry, root / "proxy", f"{CLIENT_TOKEN}\n",
                        lambda host: [f"{stored.host}/proxy", "--plain-http", *flags],
                        HF_HUB_DISABLE_XET="1") as proxy:
            yield Proxied(up, counted, proxy, stored, registry, root, main, dev, model)


@pytest.fixture(autouse=True)
def lfs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)


def refs_or_none(api: HfApi, repo_id: str) -> Any:
    """list_repo_refs, or no refs while the repository is not yet named here (a commit that just landed)."""
    try:
        return api.list_repo_refs(repo_id)
    except huggingface_hub.errors.RepositoryNotFoundError:
        return SimpleNamespace(branches=[], tags=[])


def test_a_model_the_registry_lacks_is_fetched_once_and_answered_as_the_upstreams_commit(proxied: Proxied,
                                                                                          tmp_path: Path):
    api = proxied.api()
    assert api.model_info("acme/tiny").sha == proxied.main  # the upstream's id, not serve's
    got = Path(huggingface_hub.snapshot_download("acme/tiny", endpoint=proxied.proxy, token=CLIENT_TOKEN,
                                                 cache_dir=tmp_path / "a"))
    assert {k: v for k, v in files_of(got).items() if k != ".gitattributes"} == files_of(proxied.model)
    # a pinned revision of the upstream, not fetched yet: dev's commit
    pinned = huggingface_hub.hf_hub_download("acme/tiny", "DEV.md", revision=proxied.dev, endpoint=proxied.proxy,
                                             token=CLIENT_TOKEN, cache_dir=tmp_path / "b")
    assert Path(pinned).read_bytes() == b"dev only\n"
    head = httpx.head(f"{proxied.proxy}/acme/tiny/resolve/{proxied.dev}/DEV.md",
                      headers={"Authorization": f"Bearer {CLIENT_TOKEN}"})
    assert head.headers["x-repo-commit"] == proxied.dev
    assert api.model_info("acme/tiny", revision=proxied.dev).sha == proxied.dev
    assert api.model_info("acme/tiny", revision="v1").sha == proxied.main  # a name of a commit fetched already
    proxied.landed("proxy/acme/tiny", proxied.main, proxied.dev)
    until = time.monotonic() + 30  # the commit lands, then its fetch names it and forgets what was read before
    refs = refs_or_none(api, "acme/tiny")
    while not ([b for b in refs.branches if b.name == "main"] and [t for t in refs.tags if t.name == "v1"]):
        assert time.monotonic() < until, f"main and v1 never listed: {refs}"
        time.sleep(0.1)
        refs = refs_or_none(api, "acme/tiny")
    assert [b.target_commit for b in refs.branches if b.name == "main"] == [proxied.main]
    assert {t.name: t.target_commit for t in refs.tags}.get("v1") == proxied.main  # a fetched name: a plain tag
    # the upstream got serve's token, never the client's
    sent = {r.headers.get("authorization") for r in proxied.counted.requests}
    assert sent == {f"Bearer {UP_TOKEN}"}
    # the mapping is in the registry: the upstream's ids tag what was fetched
    tags = proxied.tags("proxy/acme/tiny")
    assert {f"ocibridge-upstream-{proxied.main}", f"ocibridge-upstream-{proxied.dev}", "latest"} <= set(tags)
    # the files passed through serve's own Hub cache, which keeps nothing once the registry holds them
    hub = proxied.root / "proxy" / "cache" / "upstream-hub"
    until = time.monotonic() + 30  # the last fetch of the repository to end empties it, once it named its commit
    while list(hub.glob("models--*")):
        assert time.monotonic() < until, f"{hub}: kept after the fetches ended"
        time.sleep(0.1)
    assert hub.is_dir()
    landed = [json.loads(line) for line in (proxied.root / "audit.jsonl").read_text().splitlines()]
    ingests = [e for e in landed if e["action"] == "upstream_ingest" and e["repository"] == "acme/tiny"]
    assert sorted(e["commit"] for e in ingests) == sorted([proxied.main, proxied.dev])
    assert all(e["outcome"] == "landed" and e["digest"].startswith("sha256:") for e in ingests)


def test_a_second_load_sends_the_upstream_nothing(proxied: Proxied, tmp_path: Path):
    huggingface_hub.snapshot_download("acme/tiny", endpoint=proxied.proxy, token=CLIENT_TOKEN,
                                      cache_dir=tmp_path / "first")
    proxied.named_main("proxy/acme/tiny", proxied.main)  # (run first, its fetch may still be under way)
    before = len(proxied.counted.requests)
    again = Path(huggingface_hub.snapshot_download("acme/tiny", endpoint=proxied.proxy, token=CLIENT_TOKEN,
                                                   cache_dir=tmp_path / "second"))
    huggingface_hub.hf_hub_download("acme/tiny", "config.json", revision=proxied.main, endpoint=proxied.proxy,
                                    token=CLIENT_TOKEN, cache_dir=tmp_path / "third")
    assert (again / "config.json").read_bytes() == (proxied.model / "config.json").read_bytes()
    assert proxied.counted.requests[before:] == []


def test_a_second_load_is_answered_from_serves_model_cache_no_file_read_from_the_registry(proxied: Proxied,
                                                                                          tmp_path: Path):
    model = make_model(tmp_path / "warm", weights=4096)  # a 1 MiB weights file (LFS) and small ones
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("acme/warm")
    commit = up.upload_folder(repo_id="acme/warm", folder_path=model).oid
    huggingface_hub.snapshot_download("acme/warm", endpoint=proxied.proxy, token=CLIENT_TOKEN,
                                      cache_dir=tmp_path / "first")
    proxied.named_main("proxy/acme/warm", commit)
    manifest = httpx.get(f"{proxied.registry.url}/v2/proxy/acme/warm/manifests/ocibridge-upstream-{commit}",
                         headers={"Accept": ACCEPT}).json()
    layers = {layer["digest"] for layer in manifest["layers"]}
    assert len(layers) == len(files_of(model))  # a raw layer a file
    before, asked = len(proxied.stored.requests), len(proxied.counted.requests)
    again = Path(huggingface_hub.snapshot_download("acme/warm", endpoint=proxied.proxy, token=CLIENT_TOKEN,
                                                   cache_dir=tmp_path / "second"))
    assert {k: v for k, v in files_of(again).items() if k != ".gitattributes"} == files_of(model)
    fetched = [r.path for r in proxied.stored.requests[before:] if r.method == "GET" and "/blobs/" in r.path
               and r.path.rsplit("/", 1)[-1].split("?")[0] in layers]
    assert fetched == []  # every file from the model cache the fetch filled, none from the registry
    assert proxied.counted.requests[asked:] == []  # nor from the upstream


def test_the_registry_holds_the_artifact_push_hf_makes_of_the_same_commit(proxied: Proxied, tmp_path: Path):
    proxied.api().model_info("acme/tiny")  # fetched, if no test before did
    proxied.landed("proxy/acme/tiny", proxied.main)
    hub = tmp_path / "hub"
    huggingface_hub.snapshot_download("acme/tiny", revision=proxied.main, endpoint=proxied.upstream,
                                      token=UP_TOKEN, cache_dir=hub)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_CACHE": str(hub), "HF_ENDPOINT": proxied.upstream,
           "OCIBRIDGE_CACHE": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "-m", "ocibridge", "push", f"hf:acme/tiny@{proxied.main}",
                    f"{proxied.registry.host}/pushed/acme/tiny:main", "--plain-http", "-q"],
                   env=env, check=True, capture_output=True, timeout=120)
    pushed = proxied.digest("pushed/acme/tiny", "main")
    assert pushed is not None
    assert proxied.digest("proxy/acme/tiny", f"ocibridge-upstream-{proxied.main}") == pushed


def test_concurrent_requests_for_a_missing_commit_share_one_fetch(proxied: Proxied):
    api = proxied.api()
    with ThreadPoolExecutor(6) as pool:
        shas = set(pool.map(lambda _: api.model_info("acme/other").sha, range(6)))
    assert len(shas) == 1
    listings = proxied.asked("/api/models/acme/other/tree/")
    assert len(listings) == 1, listings
    assert len(proxied.counted.requests_matching("GET", "/acme/other/resolve/.*/w.safetensors")) == 1


def test_a_denied_repository_and_a_pickle_file_are_refused_naming_the_rule(proxied: Proxied):
    headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
    denied = httpx.get(f"{proxied.proxy}/api/models/secret/model", headers=headers)
    assert denied.status_code == 403
    assert "--upstream-deny secret/*" in denied.headers["x-error-message"]
    assert proxied.asked("secret") == []  # decided on the repo id: the upstream not asked
    pickled = httpx.get(f"{proxied.proxy}/api/models/acme/pickled/revision/main", headers=headers)
    assert pickled.status_code == 403
    assert "pytorch_model.bin" in pickled.headers["x-error-message"]
    assert "--upstream-allow-pickle" in pickled.headers["x-error-message"]
    asked = proxied.asked("acme/pickled")
    assert asked and all(p.startswith("/api/models/acme/pickled/revision/") for p in asked)  # metadata only
    assert proxied.tags("proxy/acme/pickled") == [] and proxied.tags("proxy/secret/model") == []
    audit = [json.loads(line) for line in (proxied.root / "audit.jsonl").read_text().splitlines()]
    refused = {e["repository"] for e in audit if e["action"] == "upstream_ingest" and e["outcome"] == "refused"}
    assert {"secret/model", "acme/pickled"} <= refused


def test_with_the_upstream_down_what_was_fetched_is_served_after_a_restart_and_a_miss_is_503(proxied: Proxied,
                                                                                              tmp_path: Path):
    proxied.api().model_info("acme/tiny")  # fetched, if no test before did
    proxied.landed("proxy/acme/tiny", proxied.main)
    down = FaultProxy(proxied.upstream)
    down.stop()  # nothing listens there now
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(tmp_path / "cache")}
    args = [f"{proxied.registry.host}/proxy", "--plain-http", "--no-access-log", "--upstream", down.url,
            "--upstream-fresh", "0"]
    with serve_as_process(args, env, tmp_path / "serve.log") as again:
        api = HfApi(endpoint=again)
        assert api.model_info("acme/tiny").sha == proxied.main  # the mapping survived the restart
        got = huggingface_hub.hf_hub_download("acme/tiny", "config.json", revision=proxied.main, endpoint=again,
                                              cache_dir=tmp_path / "hub")
        assert Path(got).read_bytes() == (proxied.model / "config.json").read_bytes()
        started = (tmp_path / "serve.log").read_text()
        assert f"a proxy of {down.url} (with no token)" in started and "a branch never re-checked" in started
        miss = httpx.get(f"{again}/api/models/acme/never-fetched")
        assert miss.status_code == 503
        assert int(miss.headers["retry-after"]) > 0
        assert "upstream" in miss.headers["x-error-message"]


def test_a_branch_head_is_re_checked_at_most_every_upstream_fresh_seconds(proxied: Proxied, tmp_path: Path):
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("acme/moving")
    first = up.upload_file(path_or_fileobj=b"1", path_in_repo="n.txt", repo_id="acme/moving").oid
    (tmp_path / "fresh").mkdir()
    flags = ["--upstream", proxied.counted.url, "--upstream-token-file", str(proxied.root / "up-token.txt"),
             "--upstream-fresh", "1"]
    with serve_over(proxied.registry, tmp_path / "fresh", f"{CLIENT_TOKEN}\n",
                    lambda host: [f"{host}/fresh", "--plain-http", *flags],
                    HF_HUB_DISABLE_XET="1") as proxy:
        api = HfApi(endpoint=proxy, token=CLIENT_TOKEN)
        assert api.model_info("acme/moving").sha == first
        second = up.upload_file(path_or_fileobj=b"2", path_in_repo="n.txt", repo_id="acme/moving").oid
        time.sleep(1.2)
        assert api.model_info("acme/moving").sha == second  # main re-resolved at the upstream, fetched
        got = huggingface_hub.hf_hub_download("acme/moving", "n.txt", endpoint=proxy, token=CLIENT_TOKEN,
                                              cache_dir=tmp_path / "c")
        assert Path(got).read_bytes() == b"2"
        assert api.model_info("acme/moving", revision=first).sha == first  # the old commit stays addressable


def test_the_upstream_flags_are_checked_before_serve_starts(tmp_path: Path):
    from ocibridge.api.serve import ServeOptions, create_app
    from ocibridge.errors import UsageError

    cases = (("127.0.0.1:1/x", ServeOptions(upstream_deny=("a/*",)), "go with --upstream URL"),
             (f"oci:{tmp_path / 'lay'}", ServeOptions(upstream="http://127.0.0.1:1"), "is not one"),
             ("127.0.0.1:1/x", ServeOptions(upstream="ftp://hub"), "--upstream 'ftp://hub'"),
             ("127.0.0.1:1/x", ServeOptions(upstream="http://h", upstream_token_file=str(tmp_path / "none")),
              "--upstream-token-file"),
             ("127.0.0.1:1/x", ServeOptions(upstream="http://h", upstream_fresh=-1), "--upstream-fresh"))
    for source, options, said in cases:
        with pytest.raises(UsageError, match=re.escape(said)):
            create_app(source, options=options)


def test_a_fetch_cut_mid_file_cuts_its_reader_commits_nothing_and_the_next_request_resumes_the_file(
        proxied: Proxied, tmp_path: Path):
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("acme/cut")
    weights = bytes(range(256)) * 8192  # 2 MiB: the engine reads 512 KiB at once
    sha = up.upload_file(path_or_fileobj=weights, path_in_repo="w.safetensors", repo_id="acme/cut").oid
    file = r"/acme/cut/resolve/.*/w\.safetensors"
    cut = proxied.counted.add("GET", file, drop_response(after=1_600_000))
    down = proxied.counted.add("GET", file, server_error(503), times=None)  # the engine's own retry fails too
    headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
    with pytest.raises(httpx.HTTPError):  # the body ends short of its length: the client knows
        httpx.get(f"{proxied.proxy}/acme/cut/resolve/main/w.safetensors", headers=headers, timeout=120)
    assert cut.applied == 1 and down.applied >= 1
    assert proxied.ended("acme/cut", 1) == ["failed"]
    assert proxied.tags("proxy/acme/cut") == []  # nothing of the commit in the registry
    down.times = down.applied  # the upstream whole again
    got = huggingface_hub.hf_hub_download("acme/cut", "w.safetensors", endpoint=proxied.proxy, token=CLIENT_TOKEN,
                                          cache_dir=tmp_path / "c")
    assert Path(got).read_bytes() == weights
    resumed = proxied.counted.requests_matching("GET", file)[-1].headers.get("range", "")
    assert re.fullmatch(r"bytes=([1-9][0-9]*)-", resumed), resumed  # from what the cut fetch had received
    proxied.landed("proxy/acme/cut", sha)
    assert proxied.ended("acme/cut", 2) == ["failed", "landed"]


def test_a_file_that_fails_its_check_is_cut_for_its_reader_and_fetched_whole_again(proxied: Proxied,
                                                                                    tmp_path: Path):
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("acme/bad")
    weights = bytes(range(256)) * 300
    sha = up.upload_file(path_or_fileobj=weights, path_in_repo="w.safetensors", repo_id="acme/bad").oid
    file = r"/acme/bad/resolve/.*/w\.safetensors"
    proxied.counted.add("GET", file, corrupt(offset=1000))
    received = received_until_cut(f"{proxied.proxy}/acme/bad/resolve/main/w.safetensors", CLIENT_TOKEN)
    assert len(received) < len(weights)  # never the last byte of a file that did not check
    assert proxied.ended("acme/bad", 1) == ["failed"]
    assert proxied.tags("proxy/acme/bad") == []
    got = huggingface_hub.hf_hub_download("acme/bad", "w.safetensors", endpoint=proxied.proxy, token=CLIENT_TOKEN,
                                          cache_dir=tmp_path / "c")
    assert Path(got).read_bytes() == weights
    assert "range" not in proxied.counted.requests_matching("GET", file)[-1].headers  # whole again
    proxied.landed("proxy/acme/bad", sha)


def test_a_file_streams_to_its_readers_before_the_commit_lands_fetched_once_for_all(proxied: Proxied,
                                                                                     tmp_path: Path):
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("acme/streamed")
    weights = bytes(range(256)) * 2048  # 512 KiB
    for path, data in (("w.safetensors", weights), ("late.safetensors", b"\x01" * 4096)):
        sha = up.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id="acme/streamed").oid
    proxied.counted.add("GET", r"/acme/streamed/resolve/.*/w\.safetensors", throttle(2 << 20))
    proxied.counted.add("GET", r"/acme/streamed/resolve/.*/late\.safetensors", delay(8))

    def load(n: int) -> bytes:
        return Path(huggingface_hub.hf_hub_download("acme/streamed", "w.safetensors", revision=sha,
                                                    endpoint=proxied.proxy, token=CLIENT_TOKEN,
                                                    cache_dir=tmp_path / str(n))).read_bytes()

    with ThreadPoolExecutor(4) as pool:
        loaded = list(pool.map(load, range(4)))
    assert loaded == [weights] * 4
    # read while the commit's other file was still on its way (not a byte of it sent to serve yet):
    # not one tag of it in the registry
    late = proxied.counted.requests_matching("GET", r"/acme/streamed/resolve/.*/late\.safetensors")
    assert late and all(r.response_bytes == 0 for r in late), [(r.path, r.response_bytes) for r in late]
    assert proxied.tags("proxy/acme/streamed") == []
    # the metadata while in flight is the upstream's, listing the files serve will hold (no .gitattributes)
    listed = proxied.api().model_info("acme/streamed", revision=sha).siblings or []
    assert sorted(s.rfilename for s in listed) == ["late.safetensors", "w.safetensors"]
    assert proxied.tags("proxy/acme/streamed") == []
    assert len(proxied.counted.requests_matching("GET", r"/acme/streamed/resolve/.*/w\.safetensors")) == 1
    proxied.landed("proxy/acme/streamed", sha)
    assert proxied.ended("acme/streamed", 1) == ["landed"]


def test_with_sign_key_a_fetched_commit_is_signed_and_its_provenance_names_the_upstream(proxied: Proxied,
                                                                                      tmp_path: Path):
    from ocibridge.cli import main

    proxied.api().model_info("acme/tiny")  # fetched, if no test before did
    proxied.landed("proxy/acme/tiny", proxied.main)
    ref = f"{proxied.registry.host}/proxy/acme/tiny:latest"
    public = str(proxied.root / "keys" / "cosign.pub")
    assert main(["verify", ref, "--key", public, "--plain-http"]) == 0
    assert main(["pull", ref, str(tmp_path / "out"), "-q", "--plain-http", "--with-attestations",
                 "--verify-key", public]) == 0
    said = [json.loads(base64.b64decode(json.loads(p.read_text())["dsseEnvelope"]["payload"]))
            for p in (tmp_path / "out" / ".ocibridge" / "attestations").glob("slsaprovenance1*")]
    assert said, "no provenance pulled"
    external = said[0]["predicate"]["buildDefinition"]["externalParameters"]
    assert proxied.counted.url in external["summary"] and proxied.main in external["summary"]


def test_transformers_and_the_hf_command_load_through_the_proxy(proxied: Proxied, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch):
    from transformers import AutoConfig, AutoTokenizer

    point_hub_at(monkeypatch, proxied.proxy, tmp_path / "hub")
    monkeypatch.setenv("HF_TOKEN", CLIENT_TOKEN)
    config = AutoConfig.from_pretrained("acme/tiny", revision=proxied.main, token=CLIENT_TOKEN)
    assert config.model_type == "bert" and config.hidden_size == 32
    tokenizer = AutoTokenizer.from_pretrained("acme/tiny", token=CLIENT_TOKEN)
    assert tokenizer.convert_tokens_to_ids(["hello", "world"]) == [4, 5]
    env = {**os.environ, "HF_ENDPOINT": proxied.proxy, "HF_TOKEN": CLIENT_TOKEN, "HF_HUB_DISABLE_XET": "1",
           "HF_HUB_CACHE": str(tmp_path / "cli")}
    done = subprocess.run([str(Path(sys.executable).parent / "hf"), "download", "acme/tiny", "config.json",
                           "--revision", proxied.main], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.strip().splitlines()[-1].split("path:")[-1].strip()  # hf 1.x: "  path: P"; older: P
    assert Path(printed).read_bytes() == (proxied.model / "config.json").read_bytes()


def card(front: str) -> bytes:
    return f"---\n{front}\n---\n# a model\n".encode()


def test_the_door_refuses_by_license_by_file_pattern_and_a_gated_or_private_upstream_repository(
        proxied: Proxied, tmp_path: Path):
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    repos = {"door/apache": {"README.md": card("license: apache-2.0"), "w.safetensors": b"\x00" * 64},
             "door/mit": {"README.md": card("license: mit"), "w.safetensors": b"\x01" * 64},
             "door/own": {"README.md": card("license: other\nlicense_name: acme-1.0"), "w.safetensors": b"\x02" * 64},
             "door/bare": {"w.safetensors": b"\x03" * 64},
             "door/onnx": {"README.md": card("license: apache-2.0"), "onnx/model.onnx": b"\x04" * 64},
             "door/gated": {"README.md": card("license: apache-2.0"), "w.safetensors": b"\x05" * 64},
             "door/private": {"README.md": card("license: apache-2.0"), "w.safetensors": b"\x06" * 64}}
    for repo, files in repos.items():
        up.create_repo(repo, private=repo == "door/private")
        for path, data in files.items():
            up.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=repo)
    up.update_repo_settings("door/gated", gated="auto")
    (tmp_path / "door").mkdir()
    flags = ["--upstream", proxied.counted.url, "--upstream-token-file", str(proxied.root / "up-token.txt"),
             "--upstream-license", "apache-2.0", "--upstream-license", "ACME-1.0",
             "--upstream-refuse-files", "*.onnx", "--audit-log", str(tmp_path / "audit.jsonl")]
    with serve_over(proxied.registry, tmp_path / "door", f"{CLIENT_TOKEN}\n",
                    lambda host: [f"{host}/door", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as proxy:
        api = HfApi(endpoint=proxy, token=CLIENT_TOKEN)
        assert api.model_info("door/apache").cardData["license"] == "apache-2.0"
        assert api.model_info("door/own").sha  # license: other, its license_name allowed (case-insensitive)
        headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
        said = {}
        for repo in ("door/mit", "door/bare", "door/onnx", "door/gated", "door/private"):
            answer = httpx.get(f"{proxy}/api/models/{repo}", headers=headers)
            said[repo] = (answer.status_code, answer.headers.get("x-error-message", ""))
        assert said["door/mit"][0] == 403 and "names mit: refused by --upstream-license" in said["door/mit"][1]
        assert said["door/bare"][0] == 403 and "names no license" in said["door/bare"][1]
        assert said["door/onnx"][0] == 403 and "onnx/model.onnx" in said["door/onnx"][1] \
            and "--upstream-refuse-files" in said["door/onnx"][1]
        assert said["door/gated"][0] == 403 and "gated (auto) at the upstream" in said["door/gated"][1]
        assert said["door/private"][0] == 404  # its existence not told
        with pytest.raises(huggingface_hub.errors.RepositoryNotFoundError):
            api.model_info("door/private")
        for repo in ("door/mit", "door/bare", "door/onnx", "door/gated", "door/private"):
            asked = proxied.asked(f"/{repo}/")
            assert asked and all(p.startswith(f"/api/models/{repo}/revision/") for p in asked), asked  # metadata only
            assert proxied.tags(f"door/{repo}") == []
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    refused = {e["repository"] for e in audit if e["action"] == "upstream_ingest" and e["outcome"] == "refused"}
    assert refused == {"door/mit", "door/bare", "door/onnx", "door/gated", "door/private"}


def test_a_branch_answered_from_its_last_head_while_the_upstream_is_down_says_it_is_stale(proxied: Proxied,
                                                                                         tmp_path: Path):
    (tmp_path / "stale").mkdir()
    door = FaultProxy(proxied.upstream)  # the upstream as this serve sees it: stopped below
    try:
        flags = ["--upstream", door.url, "--upstream-token-file", str(proxied.root / "up-token.txt"),
                 "--upstream-fresh", "1"]
        with serve_over(proxied.registry, tmp_path / "stale", f"{CLIENT_TOKEN}\n",
                        lambda host: [f"{host}/stale", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as proxy:
            headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
            fetched = httpx.get(f"{proxy}/api/models/acme/other", headers=headers, timeout=60)
            assert fetched.status_code == 200 and "warning" not in fetched.headers
            sha = fetched.json()["sha"]
            proxied.landed("stale/acme/other", sha)  # the fetch streams on after the first answer
            door.add("GET", ".*", drop_response(after=0), times=None)  # a connection kept alive: cut too
            door.stop()
            time.sleep(1.2)  # past --upstream-fresh: main's head is asked, and the upstream cannot answer
            for _ in range(2):  # the check that failed, then an answer within --upstream-fresh of it
                stale = httpx.get(f"{proxy}/api/models/acme/other", headers=headers, timeout=60)
                assert stale.status_code == 200 and stale.json()["sha"] == sha
                assert stale.headers["warning"].startswith('110 - "Response is Stale: acme/other@main'), \
                    stale.headers.get("warning")
            got = httpx.get(f"{proxy}/acme/other/resolve/main/config.json", headers=headers, timeout=60)
            assert got.content == b"{\"other\": 1}" and "Response is Stale" in got.headers["warning"]
            pinned = httpx.get(f"{proxy}/api/models/acme/other/revision/{sha}", headers=headers, timeout=60)
            assert pinned.status_code == 200 and "warning" not in pinned.headers  # a commit id is never stale
            miss = httpx.get(f"{proxy}/api/models/acme/never-here", headers=headers, timeout=60)
            assert miss.status_code == 503 and int(miss.headers["retry-after"]) > 0
    finally:
        door.stop()


def test_a_branch_fetched_by_its_name_is_listed_as_a_branch_and_a_tag_as_a_tag(proxied: Proxied):
    api = proxied.api()
    assert api.model_info("acme/tiny").sha == proxied.main  # main fetched, if no test before did
    assert api.model_info("acme/tiny", revision="dev").sha == proxied.dev  # fetched by its name
    assert api.model_info("acme/tiny", revision="v1").sha == proxied.main
    proxied.landed("proxy/acme/tiny", proxied.main, proxied.dev)  # (run alone, these fetches are streaming)
    refs = settled_refs(api, "acme/tiny", 3)
    assert {b.name: b.target_commit for b in refs.branches} == {"main": proxied.main, "dev": proxied.dev}
    assert {t.name: t.target_commit for t in refs.tags} == {"v1": proxied.main}
    assert api.model_info("acme/tiny", revision="refs/heads/dev").sha == proxied.dev


def test_branch_names_first_fetched_at_the_same_moment_are_all_listed_as_branches(proxied: Proxied):
    """Three branches, each at a commit of its own, fetched at once: three fetches whose threads each
    record their name in the refs record. Each re-reads the record under one lock; before, each
    wrote back the record it had read, and a later write dropped another's branch (listed a tag)."""
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("acme/branchy")
    base = up.upload_file(path_or_fileobj=b"{}", path_in_repo="config.json", repo_id="acme/branchy").oid
    heads = {}
    for n in range(3):
        up.create_branch("acme/branchy", branch=f"b{n}", revision=base)
        heads[f"b{n}"] = up.upload_file(path_or_fileobj=f"{n}\n".encode(), path_in_repo="N.txt",
                                        repo_id="acme/branchy", revision=f"b{n}").oid
    api = proxied.api()
    with ThreadPoolExecutor(len(heads)) as pool:
        asked = pool.map(lambda name: api.model_info("acme/branchy", revision=name).sha, heads)
        shas = dict(zip(heads, asked, strict=True))
    assert shas == heads
    proxied.landed("proxy/acme/branchy", *heads.values())
    refs = settled_refs(api, "acme/branchy", len(heads))
    assert {b.name: b.target_commit for b in refs.branches} == heads
    assert refs.tags == []


def published_with_a_slow_file(proxied: Proxied, repo_id: str, weights: bytes) -> tuple[dict[str, bytes], str]:
    """``repo_id`` at the upstream (a config and ``w.safetensors``), its weights' GET held 1 s so
    that a fetch is still under way when other clients ask: (its files, its commit)."""
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo(repo_id)
    files = {"config.json": json.dumps({"repo": repo_id}).encode(), "w.safetensors": weights}
    for path, data in files.items():
        sha = up.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=repo_id).oid
    proxied.counted.add("GET", rf"/{repo_id}/resolve/.*/w\.safetensors", delay(1))
    return files, sha


def six_clients_fetched_once(proxied: Proxied, repo_id: str, files: dict[str, bytes], via: tuple[str, str],
                             tmp_path: Path) -> None:
    """Six clients at once, alternating between the two proxies ``via``: each gets every file
    byte for byte, and the upstream was asked for each file once in all."""

    def load(n: int) -> dict[str, bytes]:
        return {path: Path(huggingface_hub.hf_hub_download(repo_id, path, endpoint=via[n % 2], token=CLIENT_TOKEN,
                                                           cache_dir=tmp_path / f"c{n}")).read_bytes()
                for path in sorted(files)}

    with ThreadPoolExecutor(6) as pool:
        loaded = list(pool.map(load, range(6)))
    assert loaded == [files] * 6
    for path in files:
        assert len(proxied.counted.requests_matching("GET", f"/{repo_id}/resolve/.*/{path}")) == 1, path


def test_replicas_share_one_fetch_the_writer_fetches_and_the_reader_forwards(proxied: Proxied, tmp_path: Path):
    """A writer and a ``--writer`` reader, proxies over one registry prefix: clients asking both at
    once for a model neither holds get its bytes, each file asked of the upstream once in all."""
    files, sha = published_with_a_slow_file(proxied, "acme/shared", bytes(range(256)) * 1024)
    flags = ["--upstream", proxied.counted.url, "--upstream-token-file", str(proxied.root / "up-token.txt")]
    for name in ("writer", "reader"):
        (tmp_path / name).mkdir()
    with serve_over(proxied.registry, tmp_path / "writer", f"{CLIENT_TOKEN}\n",
                    lambda host: [f"{host}/shared", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as writer, \
            serve_over(proxied.registry, tmp_path / "reader", f"{CLIENT_TOKEN}\n",
                       lambda host: [f"{host}/shared", "--plain-http", *flags, "--writer", writer],
                       HF_HUB_DISABLE_XET="1") as reader:
        six_clients_fetched_once(proxied, "acme/shared", files, (writer, reader), tmp_path)
        assert len(proxied.asked("/api/models/acme/shared/tree/")) == 1
        tags = proxied.landed("shared/acme/shared", sha)
        assert [t for t in tags if t.startswith("ocibridge-upstream-")] == [f"ocibridge-upstream-{sha}"]
        # once landed, the reader answers the commit from the registry: the upstream is not asked again
        before = len(proxied.counted.requests)
        assert HfApi(endpoint=reader, token=CLIENT_TOKEN).model_info("acme/shared", revision=sha).sha == sha
        assert proxied.counted.requests[before:] == []


def test_read_only_proxies_over_one_prefix_fetch_once_the_lease_holder_fetching_its_peer_forwarding(
        proxied: Proxied, tmp_path: Path):
    """Two proxies with read tokens only, no ``--writer``: the first takes the writer lease of the
    prefix (it writes what it fetches), the second, given it as ``--peer``, stands by and sends its
    misses there. Before, neither took the lease and each asked the upstream for every file."""
    files, sha = published_with_a_slow_file(proxied, "acme/peered", bytes(range(256)) * 2048)
    flags = ["--upstream", proxied.counted.url, "--upstream-token-file", str(proxied.root / "up-token.txt")]
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    with serve_over(proxied.registry, tmp_path / "first", f"{CLIENT_TOKEN}\n",
                    lambda host: [f"{host}/peered", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as first, \
            serve_over(proxied.registry, tmp_path / "second", f"{CLIENT_TOKEN}\n",
                       lambda host: [f"{host}/peered", "--plain-http", *flags, "--peer", first],
                       HF_HUB_DISABLE_XET="1") as second:
        said = (tmp_path / "second" / "serve.log").read_text()
        assert f"misses fetched by {first} (host " in said and f"sent to {first}" in said, said
        six_clients_fetched_once(proxied, "acme/peered", files, (first, second), tmp_path)
        tags = proxied.landed("peered/acme/peered", sha)
        assert [t for t in tags if t.startswith("ocibridge-upstream-")] == [f"ocibridge-upstream-{sha}"]


def test_a_reader_whose_writer_is_down_answers_a_miss_503_and_never_asks_the_upstream(proxied: Proxied,
                                                                                       tmp_path: Path):
    flags = ["--upstream", proxied.counted.url, "--upstream-token-file", str(proxied.root / "up-token.txt"),
             "--writer", "http://127.0.0.1:9"]  # the discard port: nothing answers
    (tmp_path / "orphan").mkdir()
    with serve_over(proxied.registry, tmp_path / "orphan", f"{CLIENT_TOKEN}\n",
                    lambda host: [f"{host}/orphan", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as reader:
        before = len(proxied.counted.requests)
        auth = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
        for extra in ({}, {"X-Ocibridge-Forwarded": "1"}):  # forwarded here: never sent on
            answer = httpx.get(f"{reader}/api/models/acme/other", headers={**auth, **extra})
            assert answer.status_code == 503 and answer.headers["retry-after"] == "5", answer.text
        assert proxied.counted.requests[before:] == []  # the upstream not asked
