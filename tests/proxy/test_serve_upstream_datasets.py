"""Datasets through serve as a proxy of an upstream Hub (issue 104): one the registry lacks is
fetched from the upstream's dataset routes on first use, the upstream's commit ids kept, written
at ``PREFIX/datasets/ORG/NAME`` as serve's own dataset commits are, and read from there after; a
denied one is never asked for. The upstream and the proxy: tests/upstream_proxy.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi, hf_hub_download
from serving import serve_over
from support.faultproxy import FaultProxy, drop_response
from upstream_proxy import (
    CLIENT_TOKEN,
    UP_TOKEN,
    Proxied,
    as_push_hf_makes,
    lfs_only,  # noqa: F401 - autouse: every test here over LFS
    manifest_of,
    push_hf_manifest,
)

from ocibridge.hubserver.upstream.settings import UpstreamSettings
from ocibridge.oci.mediatypes import Family

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CARD = b"---\nlicense: mit\nconfigs:\n- config_name: default\n  data_files: data/train.csv\n---\n# rows\n"
ROWS = b"word,n\nalpha,1\nbeta,2\ngamma,3\n"


def publish_dataset(proxied: Proxied, repo: str, card: bytes = CARD, private: bool = False) -> str:
    """``repo`` as a dataset at the upstream (its card and one csv); its commit id there."""
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo(repo, repo_type="dataset", private=private)
    up.upload_file(path_or_fileobj=card, path_in_repo="README.md", repo_id=repo, repo_type="dataset")
    return up.upload_file(path_or_fileobj=ROWS, path_in_repo="data/train.csv", repo_id=repo,
                          repo_type="dataset").oid


def test_a_dataset_is_fetched_once_with_the_upstreams_commit(proxied: Proxied, tmp_path: Path):
    commit = publish_dataset(proxied, "acme/rows")
    hub = proxied.api()
    path = hf_hub_download("acme/rows", "data/train.csv", repo_type="dataset", endpoint=proxied.proxy,
                           token=CLIENT_TOKEN, cache_dir=tmp_path / "first")
    assert Path(path).read_bytes() == ROWS
    assert Path(path).parents[1].name == commit  # the snapshot named by the X-Repo-Commit served
    assert hub.dataset_info("acme/rows").sha == commit
    asked = proxied.asked("acme/rows")
    assert asked and all(p.startswith(("/api/datasets/acme/rows/", "/datasets/acme/rows/resolve/")) for p in asked)
    assert "/api/datasets/acme/rows/revision/main" in asked  # dataset_info asked, never model_info
    # in the registry at PREFIX/datasets/ORG/NAME: the dataset's artifact, as serve's own commits make it
    proxied.named_main("proxy/datasets/acme/rows", commit)
    assert proxied.tags("proxy/acme/rows") == []  # never written as the model of its name
    manifest = manifest_of(proxied.registry.url, "proxy/datasets/acme/rows", f"ocibridge-upstream-{commit}")
    assert manifest["annotations"]["io.ocibridge.hf.repo-type"] == "dataset"
    kinds = {layer["annotations"][Family.CNAI.filepath_key]: layer["mediaType"] for layer in manifest["layers"]}
    assert kinds["data/train.csv"] == "application/vnd.cnai.model.dataset.v1.raw"
    assert kinds["README.md"] == "application/vnd.cnai.model.doc.v1.raw"
    # the artifact push hf:datasets/acme/rows@COMMIT makes, with .gitattributes and the commit's facts
    as_push_hf_makes(manifest, push_hf_manifest(proxied.upstream, proxied.registry, "acme/rows", commit,
                                                tmp_path / "push", repo_type="dataset"))
    # a second load, from a cache of its own: answered from the registry, the upstream asked nothing
    before = len(proxied.counted.requests)
    again = hf_hub_download("acme/rows", "data/train.csv", repo_type="dataset", endpoint=proxied.proxy,
                            token=CLIENT_TOKEN, cache_dir=tmp_path / "second")
    assert Path(again).read_bytes() == ROWS and Path(again).parents[1].name == commit
    head = httpx.head(f"{proxied.proxy}/datasets/acme/rows/resolve/main/data/train.csv",
                      headers={"Authorization": f"Bearer {CLIENT_TOKEN}"})
    assert head.headers["x-repo-commit"] == commit
    assert hub.dataset_info("acme/rows").sha == commit
    assert proxied.counted.requests[before:] == []
    assert proxied.outcomes("datasets/acme/rows") == ["landed"]  # one fetch, audited by the dataset's key


def test_a_denied_dataset_is_refused_and_never_asked_for(proxied: Proxied):
    publish_dataset(proxied, "secret/rows")
    headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
    for path in ("/api/datasets/secret/rows", "/datasets/secret/rows/resolve/main/data/train.csv"):
        answer = httpx.get(f"{proxied.proxy}{path}", headers=headers)
        assert answer.status_code == 403, path
        assert "--upstream-deny secret/*" in answer.headers["x-error-message"]
    assert proxied.asked("secret") == []
    assert proxied.tags("proxy/datasets/secret/rows") == []


def test_the_door_globs_name_a_dataset_by_its_key():
    """An allow glob lets in what it names (``acme/*``: acme's models, no dataset; a dataset is
    named ``datasets/acme/*``); a deny glob keeps out a dataset of the ids it matches as well."""
    allow = UpstreamSettings("http://up", allow=("acme/*",))
    assert allow.denied_by("acme/x") is None
    assert allow.denied_by("datasets/acme/x") is not None
    datasets = UpstreamSettings("http://up", allow=("datasets/acme/*",))
    assert datasets.denied_by("datasets/acme/x") is None and datasets.denied_by("acme/x") is not None
    deny = UpstreamSettings("http://up", deny=("evil/*",))
    assert deny.denied_by("datasets/evil/x") == "--upstream-deny evil/*"
    assert deny.denied_by("datasets/acme/x") is None


LOAD = r"""
import json, sys
from datasets import load_dataset
print(json.dumps(load_dataset(sys.argv[1], split="train").to_dict()))
"""


def test_load_dataset_through_the_proxy(proxied: Proxied, tmp_path: Path):
    """The datasets library, unchanged, with ``HF_ENDPOINT`` at the proxy: the card's config read,
    the csv loaded from what the upstream gave."""
    publish_dataset(proxied, "acme/loaded")
    env = {**os.environ, "HF_ENDPOINT": proxied.proxy, "HF_TOKEN": CLIENT_TOKEN, "HF_HUB_CACHE": str(tmp_path / "hub"),
           "HF_DATASETS_CACHE": str(tmp_path / "datasets"), "HF_HUB_DISABLE_TELEMETRY": "1",
           "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1", "HF_HUB_DISABLE_XET": "1"}
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("HF_DATASETS_OFFLINE", None)
    run = subprocess.run([sys.executable, "-c", LOAD, "acme/loaded"], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {"word": ["alpha", "beta", "gamma"], "n": [1, 2, 3]}
    assert proxied.asked("/api/datasets/acme/loaded/")


def test_a_dataset_meets_the_doors_license_gated_and_private_rules_is_fetched_once_and_answered_stale(
        proxied: Proxied, tmp_path: Path):
    """The rules a model meets, for a dataset: the card's license, gated or private at the upstream
    (only dataset_info asked of each); many readers at once, one fetch; the upstream down, the
    last head answered with the Hub's stale warning."""
    publish_dataset(proxied, "dsdoor/ok", CARD.replace(b"mit", b"apache-2.0"))
    publish_dataset(proxied, "dsdoor/mit")
    publish_dataset(proxied, "dsdoor/gated", CARD.replace(b"mit", b"apache-2.0"))
    HfApi(endpoint=proxied.upstream, token=UP_TOKEN).update_repo_settings("dsdoor/gated", gated="auto",
                                                                           repo_type="dataset")
    publish_dataset(proxied, "dsdoor/private", CARD.replace(b"mit", b"apache-2.0"), private=True)
    (tmp_path / "dsdoor").mkdir()
    door = FaultProxy(proxied.upstream)  # the upstream as this serve sees it: counted, then stopped
    try:
        flags = ["--upstream", door.url, "--upstream-token-file", str(proxied.root / "up-token.txt"),
                 "--upstream-license", "apache-2.0", "--upstream-fresh", "1",
                 "--audit-log", str(tmp_path / "audit.jsonl")]
        with serve_over(proxied.registry, tmp_path / "dsdoor", f"{CLIENT_TOKEN}\n",
                        lambda host: [f"{host}/dsdoor", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as proxy:
            headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
            said = {}
            for repo in ("dsdoor/mit", "dsdoor/gated", "dsdoor/private"):
                answer = httpx.get(f"{proxy}/api/datasets/{repo}", headers=headers, timeout=60)
                said[repo] = (answer.status_code, answer.headers.get("x-error-message", ""))
            assert said["dsdoor/mit"][0] == 403 and "refused by --upstream-license" in said["dsdoor/mit"][1]
            assert said["dsdoor/gated"][0] == 403 and "gated (auto) at the upstream" in said["dsdoor/gated"][1]
            assert said["dsdoor/private"][0] == 404  # its existence not told
            for repo in said:
                asked = [r.path for r in door.requests if f"/{repo}/" in r.path]
                assert asked and all(p.startswith(f"/api/datasets/{repo}/revision/") for p in asked), asked
            # eight readers at once of a dataset not here: one fetch, each file asked of the upstream once
            url = f"{proxy}/datasets/dsdoor/ok/resolve/main/data/train.csv"
            with ThreadPoolExecutor(8) as pool:
                got = list(pool.map(lambda _: httpx.get(url, headers=headers, timeout=120, follow_redirects=True),
                                    range(8)))
            assert all(g.status_code == 200 and g.content == ROWS for g in got)
            sha = got[0].headers["x-repo-commit"]
            assert {g.headers["x-repo-commit"] for g in got} == {sha}
            proxied.landed("dsdoor/datasets/dsdoor/ok", sha)
            files = Counter(r.path for r in door.requests if r.path.startswith("/datasets/dsdoor/ok/resolve/"))
            assert files and set(files.values()) == {1}, files
            # the upstream down: the last head answered, and said stale
            door.add("GET", ".*", drop_response(after=0), times=None)
            door.stop()
            time.sleep(1.2)  # past --upstream-fresh: main's head is asked, and the upstream cannot answer
            stale = httpx.get(f"{proxy}/api/datasets/dsdoor/ok", headers=headers, timeout=60)
            assert stale.status_code == 200 and stale.json()["sha"] == sha
            assert stale.headers["warning"].startswith('110 - "Response is Stale: datasets/dsdoor/ok@main'), \
                stale.headers.get("warning")
            again = httpx.get(url, headers=headers, timeout=60, follow_redirects=True)
            assert again.content == ROWS and again.headers["x-repo-commit"] == sha
    finally:
        door.stop()
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    ingests = Counter((e["repository"], e["outcome"]) for e in audit if e["action"] == "upstream_ingest")
    assert ingests == {("datasets/dsdoor/ok", "landed"): 1, ("datasets/dsdoor/mit", "refused"): 1,
                       ("datasets/dsdoor/gated", "refused"): 1, ("datasets/dsdoor/private", "refused"): 1}
