"""The upstream Hub and the proxy of it that test_serve_upstream.py, its _refusals and its _shared
share (issue 87): the upstream is another ``ocibridge serve`` over its own registry prefix, holding
models published with huggingface_hub, behind a counting fault proxy; the proxy is ``ocibridge
serve`` over a second prefix of the same registry. One of each for the session (tests/conftest.py
names ``proxied``), as the tests of test_serve_upstream.py shared one when they were one module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import ROOT, own_registry_and_serve, serve_over
from signing_keys import key_pair
from support.faultproxy import FaultProxy
from support.registry import RegistryProcess

from tests.modelgen import make_bert_model

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


#: the annotations the proxy's manifest of a commit has beyond push hf:'s (upstream/commitfacts.py)
FACTS = {"io.ocibridge.commit.regular", "org.opencontainers.image.created", "io.ocibridge.upstream.repo-created",
         "io.ocibridge.commit.summary", "io.ocibridge.commit.description", "io.ocibridge.commit.author"}


def as_push_hf_makes(fetched: dict[str, Any], pushed: dict[str, Any]) -> None:
    """The proxy's manifest of a commit (``fetched``) is the one ``push hf:`` makes of it
    (``pushed``), with the commit's ``.gitattributes`` (one layer more) and what the upstream says
    of the commit (annotations more): push hf: reads a Hub cache, which keeps neither."""
    extra = [layer for layer in fetched["layers"] if layer not in pushed["layers"]]
    assert [layer["annotations"]["org.opencontainers.image.title"] for layer in extra] == [".gitattributes"]
    assert [layer for layer in fetched["layers"] if layer not in extra] == pushed["layers"]
    said = fetched["annotations"]
    assert {k: v for k, v in said.items() if k in pushed["annotations"]} == pushed["annotations"]
    more = set(said) - set(pushed["annotations"])
    assert {"io.ocibridge.commit.regular", "org.opencontainers.image.created"} <= more <= FACTS


def push_hf_manifest(upstream: str, registry: RegistryProcess, repo_id: str, commit: str,
                     work: Path, repo_type: str = "model") -> dict[str, Any]:
    """The manifest ``ocibridge push hf:REPO@COMMIT`` (a dataset's: ``hf:datasets/REPO@COMMIT``)
    makes of the upstream's commit (downloaded with huggingface_hub into a Hub cache of its own,
    pushed to ``pushed/[datasets/]REPO:main``): what the proxy's manifest of the same commit is
    compared with (:func:`as_push_hf_makes`)."""
    hub = work / "hub"
    huggingface_hub.snapshot_download(repo_id, revision=commit, endpoint=upstream, token=UP_TOKEN, cache_dir=hub,
                                      repo_type=repo_type)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_CACHE": str(hub), "HF_ENDPOINT": upstream,
           "OCIBRIDGE_CACHE": str(work / "cache")}
    typed = repo_id if repo_type == "model" else f"{repo_type}s/{repo_id}"
    subprocess.run([sys.executable, "-m", "ocibridge", "push", f"hf:{typed}@{commit}",
                    f"{registry.host}/pushed/{typed}:main", "--plain-http", "-q"],
                   env=env, check=True, capture_output=True, timeout=120)
    return manifest_of(registry.url, f"pushed/{typed}", "main")


def manifest_of(registry: str, repository: str, tag: str) -> dict[str, Any]:
    """The manifest ``tag`` names. A 500 is asked again (5 times at most), as ocibridge's own client
    does: distribution's filesystem storage rewrites a manifest's revision link in place each time
    the manifest is put under another tag (the proxy tags a landed commit three ways), and a read in
    that instant finds the link empty ("invalid checksum digest format")."""
    for _ in range(5):
        answer = httpx.get(f"{registry}/v2/{repository}/manifests/{tag}", headers={"Accept": ACCEPT})
        if answer.status_code != 500:
            break
        time.sleep(0.1)
    assert answer.status_code == 200, (repository, tag, answer.status_code, answer.text)
    return dict(answer.json())


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
    model = make_bert_model(root / "tiny")
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


@pytest.fixture(scope="session")
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
