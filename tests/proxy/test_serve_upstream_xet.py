"""serve as a proxy of an upstream Hub that offers Xet (issue 87: "Xet from upstreams that offer
it, LFS otherwise"), against real processes: the upstream is an ``ocibridge serve`` holding models
uploaded with hf_xet, behind a counting fault proxy that its Xet URLs name too (``--public-url``:
the grant's CAS URL and the signed xorb URLs come back through it); the proxy is ``ocibridge
serve --upstream`` over a second prefix of the same registry. Clients are huggingface_hub's own."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import files_of, own_registry_and_serve, received_until_cut, serve_over
from support.faultproxy import FaultProxy, corrupt, drop_response, server_error, status
from support.registry import RegistryProcess
from upstream_proxy import as_push_hf_makes, manifest_of, push_hf_manifest

from ocibridge.hubserver.upstream.tee import FileFlight
from ocibridge.hubserver.upstream.xetfetch import name_holds
from ocibridge.hubserver.xet import merkle, xorbs
from tests.modelgen import make_bert_model

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
hf_xet = pytest.importorskip("hf_xet")

UP_TOKEN = "up-token"
CLIENT_TOKEN = "client-token"
ACCEPT = "application/vnd.oci.image.manifest.v1+json"
#: a file of two of the upstream's xorbs (64 MiB each, xet/xorbs.py), the second of 8 chunks
TWO_XORBS = xorbs.XET_CHUNK * xorbs.XORB_CHUNKS + 8 * xorbs.XET_CHUNK


@dataclass
class Upstream:
    url: str  # the upstream serve, straight
    counted: FaultProxy  # in front of it: what the proxy asks the upstream, its Xet URLs included
    proxy: str
    registry: RegistryProcess
    root: Path
    model: Path  # acme/tiny's files
    main: str  # acme/tiny's commit

    def tags(self, repository: str) -> list[str]:
        answer = httpx.get(f"{self.registry.url}/v2/{repository}/tags/list")
        return list(answer.json().get("tags") or []) if answer.status_code == 200 else []

    def digest(self, repository: str, tag: str) -> str | None:
        answer = httpx.head(f"{self.registry.url}/v2/{repository}/manifests/{tag}", headers={"Accept": ACCEPT})
        return answer.headers.get("docker-content-digest") if answer.status_code == 200 else None

    def landed(self, repository: str, commit: str, timeout: float = 60) -> None:
        until = time.monotonic() + timeout
        while f"ocibridge-upstream-{commit}" not in self.tags(repository):
            assert time.monotonic() < until, f"{repository}: {commit} never landed"
            time.sleep(0.1)

    def ended(self, repository: str, count: int, timeout: float = 60) -> list[str]:
        """The repository's ingest outcomes once ``count`` fetches of it ended."""
        until = time.monotonic() + timeout
        while True:
            lines = (self.root / "audit.jsonl").read_text().splitlines() if (self.root / "audit.jsonl").exists() else []
            said = [e["outcome"] for e in map(json.loads, lines)
                    if e["action"] == "upstream_ingest" and e["repository"] == repository]
            if len(said) >= count:
                return said
            assert time.monotonic() < until, f"{repository}: {said}"
            time.sleep(0.1)

    def upload(self, repo_id: str, path: str, data: bytes) -> str:
        """``data`` uploaded over Xet (hf_xet) at the upstream; its commit."""
        api = HfApi(endpoint=self.url, token=UP_TOKEN)
        api.create_repo(repo_id)
        before = len(self.counted.requests_matching("POST", "/xet-write/"))
        commit = api.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=repo_id).oid
        assert len(self.counted.requests_matching("POST", "/xet-write/")) > before, "not uploaded over Xet"
        return commit


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    root = tmp_path_factory.mktemp("upstream-xet")
    (root / "up-token.txt").write_text(UP_TOKEN + "\n")
    (root / "proxy").mkdir()
    with pytest.MonkeyPatch.context() as patch, FaultProxy("http://127.0.0.1:9") as counted:
        patch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", False)
        with own_registry_and_serve(root / "up", f"{UP_TOKEN} write\n",
                                    lambda host: [f"{host}/up", "--plain-http", "--public-url", counted.url]) \
                as (up, registry):
            counted.point_at(up)
            api = HfApi(endpoint=up, token=UP_TOKEN)
            model = make_bert_model(root / "tiny")
            api.create_repo("acme/tiny")
            main = api.upload_folder(repo_id="acme/tiny", folder_path=model).oid
            assert counted.requests_matching("POST", "/xet-write/acme/tiny/v1/xorbs/"), "not uploaded over Xet"
            flags = ["--upstream", counted.url, "--upstream-token-file", str(root / "up-token.txt"),
                     "--audit-log", str(root / "audit.jsonl")]
            with serve_over(registry, root / "proxy", f"{CLIENT_TOKEN}\n",
                            lambda host: [f"{host}/proxy", "--plain-http", *flags], HF_HUB_DISABLE_XET="0") as proxy:
                yield Upstream(up, counted, proxy, registry, root, model, main)


def xorb_path(repo_id: str, k: int | None = None) -> str:
    """The upstream's xorb URLs of ``repo_id`` (the ``k``-th of a file)."""
    return rf"/xet/[0-9a-f]{{40}}/{repo_id}/xorbs/[0-9a-f]{{64}}/[0-9]+/{'[0-9]+' if k is None else k}\?"


def test_a_file_the_upstream_offers_over_xet_comes_by_xet_and_lands_as_push_hf_makes_it(upstream: Upstream,
                                                                                        tmp_path: Path):
    got = Path(huggingface_hub.snapshot_download("acme/tiny", endpoint=upstream.proxy, token=CLIENT_TOKEN,
                                                 cache_dir=tmp_path / "a"))
    assert {k: v for k, v in files_of(got).items() if k != ".gitattributes"} == files_of(upstream.model)
    upstream.landed("proxy/acme/tiny", upstream.main)
    # the weights came by the upstream's Xet routes (a grant, a reconstruction, its xorbs), never resolve
    assert upstream.counted.requests_matching("GET", f"/api/models/acme/tiny/xet-read-token/{upstream.main}")
    assert upstream.counted.requests_matching("GET", rf"/xet/{upstream.main}/acme/tiny/v1/reconstructions/")
    assert upstream.counted.requests_matching("GET", xorb_path("acme/tiny"))
    assert upstream.counted.requests_matching("GET", "/acme/tiny/resolve/.*/model.safetensors") == []
    # the files in git (never in Xet at the Hub) by resolve
    assert upstream.counted.requests_matching("GET", "/acme/tiny/resolve/.*/config.json")
    # the artifact that landed is the one push hf: makes of the same commit (read over Xet too)
    pushed = push_hf_manifest(upstream.url, upstream.registry, "acme/tiny", upstream.main, tmp_path)
    # with the commit's .gitattributes and the upstream's facts of it, which the Hub cache does not keep
    as_push_hf_makes(manifest_of(upstream.registry.url, "proxy/acme/tiny", f"ocibridge-upstream-{upstream.main}"),
                     pushed)


def test_a_cut_mid_xorb_cuts_its_reader_commits_nothing_and_the_next_fetch_resumes_at_the_chunk_it_lacked(
        upstream: Upstream, tmp_path: Path):
    weights = os.urandom(TWO_XORBS)
    commit = upstream.upload("acme/cut", "w.safetensors", weights)
    second = xorb_path("acme/cut", 1)
    cut = upstream.counted.add("GET", second, drop_response(after=300_000))  # 4 of its 8 chunks
    down = upstream.counted.add("GET", second, server_error(503), times=None)  # asked again: still down
    headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
    with pytest.raises(httpx.HTTPError):  # the body ends short of its length: the client knows
        httpx.get(f"{upstream.proxy}/acme/cut/resolve/main/w.safetensors", headers=headers, timeout=120)
    assert cut.applied == 1 and down.applied >= 1
    assert upstream.ended("acme/cut", 1) == ["failed"]
    assert upstream.tags("proxy/acme/cut") == []  # nothing of the commit in the registry
    down.times = down.applied  # the upstream whole again
    got = huggingface_hub.hf_hub_download("acme/cut", "w.safetensors", endpoint=upstream.proxy,
                                          token=CLIENT_TOKEN, cache_dir=tmp_path / "c")
    assert Path(got).read_bytes() == weights
    upstream.landed("proxy/acme/cut", commit)
    assert upstream.ended("acme/cut", 2) == ["failed", "landed"]
    # the first xorb (a term whole before the cut) was fetched once; the second, again from the
    # first chunk the cut one lacked (those before it kept, with their hashes, for the file's Xet hash)
    assert len(upstream.counted.requests_matching("GET", xorb_path("acme/cut", 0))) == 1
    asked = upstream.counted.requests_matching("GET", "/acme/cut/v1/reconstructions/")[-1].headers.get("range", "")
    start = int(re.fullmatch(r"bytes=([0-9]+)-[0-9]+", asked)[1])
    kept = (start - xorbs.XET_CHUNK * xorbs.XORB_CHUNKS) // xorbs.XET_CHUNK
    assert 1 <= kept <= 4, asked  # the cut came in its fifth chunk
    again = upstream.counted.requests_matching("GET", second)[-1].headers.get("range", "")
    assert again.startswith(f"bytes={kept * (xorbs.XET_CHUNK + xorbs.HEADER)}-"), again
    assert upstream.counted.requests_matching("GET", "/acme/cut/resolve/.*/w.safetensors") == []


def test_a_file_whose_xorbs_do_not_hash_to_its_sha256_is_cut_for_its_reader_and_fetched_whole_again(
        upstream: Upstream, tmp_path: Path):
    weights = bytes(range(256)) * 1024  # 4 chunks
    commit = upstream.upload("acme/bad", "w.safetensors", weights)
    upstream.counted.add("GET", xorb_path("acme/bad", 0), corrupt(offset=1000))
    received = received_until_cut(f"{upstream.proxy}/acme/bad/resolve/main/w.safetensors", CLIENT_TOKEN)
    assert len(received) < len(weights)  # never the last byte of a file that did not check
    assert upstream.ended("acme/bad", 1) == ["failed"]
    assert upstream.tags("proxy/acme/bad") == []
    got = huggingface_hub.hf_hub_download("acme/bad", "w.safetensors", endpoint=upstream.proxy,
                                          token=CLIENT_TOKEN, cache_dir=tmp_path / "c")
    assert Path(got).read_bytes() == weights
    upstream.landed("proxy/acme/bad", commit)
    asked = upstream.counted.requests_matching("GET", "/acme/bad/v1/reconstructions/")
    assert len(asked) == 2 and "range" not in asked[-1].headers  # whole again
    assert re.fullmatch(r"bytes=0-[0-9]+", upstream.counted.requests_matching("GET", xorb_path("acme/bad", 0))[-1]
                        .headers.get("range", "")) is not None


def test_an_upstream_that_grants_no_xet_read_gives_the_file_by_resolve(upstream: Upstream, tmp_path: Path):
    weights = bytes(range(256)) * 512
    upstream.upload("acme/nogrant", "w.safetensors", weights)
    refused = upstream.counted.add("GET", "/api/models/acme/nogrant/xet-read-token/", status(404), times=None)
    got = huggingface_hub.hf_hub_download("acme/nogrant", "w.safetensors", endpoint=upstream.proxy,
                                          token=CLIENT_TOKEN, cache_dir=tmp_path / "c")
    assert Path(got).read_bytes() == weights
    assert refused.applied >= 1
    assert len(upstream.counted.requests_matching("GET", "/acme/nogrant/resolve/.*/w.safetensors")) == 1
    assert upstream.counted.requests_matching("GET", "/acme/nogrant/v1/reconstructions/") == []


def test_a_xet_hash_holds_only_when_it_is_the_hash_of_the_chunks_or_the_name_of_the_stated_sha256(tmp_path: Path):
    chunks = [os.urandom(1000), os.urandom(3000)]
    found = merkle.file_hash((merkle.chunk_hash(c), len(c)) for c in chunks)
    sha = "ab" * 32
    flight = FileFlight("w.bin", 4000, "sha256", sha, tmp_path / "p", tmp_path / "f")
    assert name_holds(merkle.hex_of(found), found, flight)  # the Hub's: the Merkle hash of the chunks
    assert name_holds(xorbs.file_id(sha, 4000), found, flight)  # ocibridge serve's: its sha256's name
    other = merkle.file_hash([(merkle.chunk_hash(chunks[0]), 1000)])
    assert not name_holds(merkle.hex_of(other), found, flight)  # another file's chunks
    assert not name_holds(xorbs.file_id("cd" * 32, 4000), found, flight)  # another sha256's name
    blob = FileFlight("w.bin", 4000, "git blob id", "ab" * 20, tmp_path / "p", tmp_path / "f")
    assert not name_holds(xorbs.file_id("ab" * 20, 4000), found, blob)


def test_a_dataset_the_upstream_offers_over_xet_comes_by_the_datasets_xet_routes(upstream: Upstream,
                                                                                 tmp_path: Path):
    rows = os.urandom(200_000)
    api = HfApi(endpoint=upstream.url, token=UP_TOKEN)
    api.create_repo("acme/xrows", repo_type="dataset")
    before = len(upstream.counted.requests_matching("POST", "/xet-write/"))
    commit = api.upload_file(path_or_fileobj=rows, path_in_repo="data/train.parquet", repo_id="acme/xrows",
                             repo_type="dataset").oid
    assert len(upstream.counted.requests_matching("POST", "/xet-write/")) > before, "not uploaded over Xet"
    got = huggingface_hub.hf_hub_download("acme/xrows", "data/train.parquet", repo_type="dataset",
                                          endpoint=upstream.proxy, token=CLIENT_TOKEN, cache_dir=tmp_path / "c")
    assert Path(got).read_bytes() == rows and Path(got).parents[1].name == commit
    upstream.landed("proxy/datasets/acme/xrows", commit)
    # the dataset's Xet grant asked (never a model's of its name), the bytes by Xet, never by resolve
    assert upstream.counted.requests_matching("GET", f"/api/datasets/acme/xrows/xet-read-token/{commit}")
    assert upstream.counted.requests_matching("GET", "/api/models/acme/xrows/") == []
    assert upstream.counted.requests_matching("GET", rf"/xet/{commit}/(datasets/)?acme/xrows/v1/reconstructions/")
    assert upstream.counted.requests_matching("GET", "/datasets/acme/xrows/resolve/.*/data/train.parquet") == []
