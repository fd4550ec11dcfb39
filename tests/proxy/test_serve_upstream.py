"""serve as a proxy of an upstream Hub (issue 87, ``serve REG/PREFIX --upstream URL``), against
real processes: the upstream is another ``ocibridge serve`` over its own registry prefix, holding
models published with huggingface_hub, behind a counting fault proxy; the proxy is ``ocibridge
serve`` over a second prefix of the same registry. Clients are huggingface_hub's own."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import files_of, point_hub_at, serve_over
from upstream_proxy import (
    CLIENT_TOKEN,
    UP_TOKEN,
    Proxied,
    as_push_hf_makes,
    lfs_only,  # noqa: F401 - autouse: every test here over LFS
    manifest_of,
    push_hf_manifest,
    refs_or_none,
    settled_refs,
)

from tests.modelgen import make_bert_model

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


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
    model = make_bert_model(tmp_path / "warm", weights=4096)  # a 1 MiB weights file (LFS) and small ones
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("acme/warm")
    commit = up.upload_folder(repo_id="acme/warm", folder_path=model).oid
    huggingface_hub.snapshot_download("acme/warm", endpoint=proxied.proxy, token=CLIENT_TOKEN,
                                      cache_dir=tmp_path / "first")
    proxied.named_main("proxy/acme/warm", commit)
    manifest = manifest_of(proxied.registry.url, "proxy/acme/warm", f"ocibridge-upstream-{commit}")
    layers = {layer["digest"] for layer in manifest["layers"]}
    assert len(layers) == len(files_of(model)) + 1  # a raw layer a file, the commit's .gitattributes too
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
    pushed = push_hf_manifest(proxied.upstream, proxied.registry, "acme/tiny", proxied.main, tmp_path)
    # with the commit's .gitattributes and the upstream's facts of it, which the Hub cache does not keep
    as_push_hf_makes(manifest_of(proxied.registry.url, "proxy/acme/tiny", f"ocibridge-upstream-{proxied.main}"),
                     pushed)


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


def test_a_branch_named_as_its_commit_begins_is_listed_as_a_branch(proxied: Proxied):
    """A short branch name that happens to be a prefix of its own commit id (``b1`` of ``b1…``: hex)
    is a name, not an abbreviated commit id (those are 7 hex digits or more): once fetched by it,
    list_repo_refs lists it as a branch (before, it was tagged nowhere and listed nowhere)."""
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("acme/hexnamed")
    head = up.upload_file(path_or_fileobj=b"{}", path_in_repo="config.json", repo_id="acme/hexnamed").oid
    name = head[:4]
    up.create_branch("acme/hexnamed", branch=name, revision=head)
    api = proxied.api()
    assert api.model_info("acme/hexnamed", revision=name).sha == head
    proxied.landed("proxy/acme/hexnamed", head)
    refs = settled_refs(api, "acme/hexnamed", 1, timeout=10)
    assert {b.name: b.target_commit for b in refs.branches}.get(name) == head
    assert refs.tags == []


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
