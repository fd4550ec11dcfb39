"""serve as a proxy of an upstream Hub (issue 87): one fetch shared by every reader, of one proxy
(concurrent requests, a file streamed before its commit lands) or of several over one registry
prefix (a writer and its readers, read-only peers). The upstream and the proxy: tests/upstream_proxy.py."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import serve_over
from support.faultproxy import delay, throttle
from upstream_proxy import (
    CLIENT_TOKEN,
    UP_TOKEN,
    Proxied,
    lfs_only,  # noqa: F401 - autouse: every test here over LFS
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _upstream_flags(proxied: Proxied) -> list[str]:
    return ["--upstream", proxied.counted.url, "--upstream-token-file", str(proxied.root / "up-token.txt")]


@contextlib.contextmanager
def _two_proxies(proxied: Proxied, tmp_path: Path, prefix: str, names: tuple[str, str],
                 link: str) -> Iterator[tuple[str, str]]:
    """Two proxies of the upstream over one registry prefix, the second given the first's URL
    with ``link`` (``--writer``: its reader; ``--peer``: its read-only peer); their URLs."""
    flags = _upstream_flags(proxied)
    for name in names:
        (tmp_path / name).mkdir()
    with serve_over(proxied.registry, tmp_path / names[0], f"{CLIENT_TOKEN}\n",
                    lambda host: [f"{host}/{prefix}", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as first, \
            serve_over(proxied.registry, tmp_path / names[1], f"{CLIENT_TOKEN}\n",
                       lambda host: [f"{host}/{prefix}", "--plain-http", *flags, link, first],
                       HF_HUB_DISABLE_XET="1") as second:
        yield first, second


def test_concurrent_requests_for_a_missing_commit_share_one_fetch(proxied: Proxied):
    api = proxied.api()
    with ThreadPoolExecutor(6) as pool:
        shas = set(pool.map(lambda _: api.model_info("acme/other").sha, range(6)))
    assert len(shas) == 1
    listings = proxied.asked("/api/models/acme/other/tree/")
    assert len(listings) == 1, listings
    proxied.ended("acme/other", 1)  # the answer comes with the listing; its files are fetched on after it
    assert len(proxied.counted.requests_matching("GET", "/acme/other/resolve/.*/w.safetensors")) == 1


def test_a_file_streams_to_its_readers_before_the_commit_lands_fetched_once_for_all(proxied: Proxied,
                                                                                     tmp_path: Path):
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("acme/streamed")
    weights = bytes(range(256)) * 2048  # 512 KiB
    for path, data in (("w.safetensors", weights), ("late.safetensors", b"\x01" * 4096)):
        sha = up.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id="acme/streamed").oid
    proxied.counted.add("GET", r"/acme/streamed/resolve/.*/w\.safetensors", throttle(2 << 20))
    looked = threading.Event()  # late.safetensors is held on its way until the test has looked (30 s at most)
    proxied.counted.add("GET", r"/acme/streamed/resolve/.*/late\.safetensors", delay(30, looked))

    def load(n: int) -> bytes:
        return Path(huggingface_hub.hf_hub_download("acme/streamed", "w.safetensors", revision=sha,
                                                    endpoint=proxied.proxy, token=CLIENT_TOKEN,
                                                    cache_dir=tmp_path / str(n))).read_bytes()

    try:
        with ThreadPoolExecutor(4) as pool:
            loaded = list(pool.map(load, range(4)))
        assert loaded == [weights] * 4
        # read while the commit's other file was still on its way (not a byte of it sent to serve yet):
        # not one tag of it in the registry
        late = proxied.counted.requests_matching("GET", r"/acme/streamed/resolve/.*/late\.safetensors")
        assert late and all(r.response_bytes == 0 for r in late), [(r.path, r.response_bytes) for r in late]
        assert proxied.tags("proxy/acme/streamed") == []
        # the metadata while in flight is the upstream's, listing the files serve will hold (.gitattributes too)
        listed = proxied.api().model_info("acme/streamed", revision=sha).siblings or []
        assert sorted(s.rfilename for s in listed) == [".gitattributes", "late.safetensors", "w.safetensors"]
        assert proxied.tags("proxy/acme/streamed") == []
        assert len(proxied.counted.requests_matching("GET", r"/acme/streamed/resolve/.*/w\.safetensors")) == 1
    finally:
        looked.set()
    proxied.landed("proxy/acme/streamed", sha)
    assert proxied.ended("acme/streamed", 1) == ["landed"]


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
    with _two_proxies(proxied, tmp_path, "shared", ("writer", "reader"), "--writer") as (writer, reader):
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
    with _two_proxies(proxied, tmp_path, "peered", ("first", "second"), "--peer") as (first, second):
        said = (tmp_path / "second" / "serve.log").read_text()
        assert f"misses fetched by {first} (host " in said and f"sent to {first}" in said, said
        six_clients_fetched_once(proxied, "acme/peered", files, (first, second), tmp_path)
        tags = proxied.landed("peered/acme/peered", sha)
        assert [t for t in tags if t.startswith("ocibridge-upstream-")] == [f"ocibridge-upstream-{sha}"]


def test_a_reader_whose_writer_is_down_answers_a_miss_503_and_never_asks_the_upstream(proxied: Proxied,
                                                                                       tmp_path: Path):
    flags = [*_upstream_flags(proxied), "--writer", "http://127.0.0.1:9"]  # the discard port: nothing answers
    (tmp_path / "orphan").mkdir()
    with serve_over(proxied.registry, tmp_path / "orphan", f"{CLIENT_TOKEN}\n",
                    lambda host: [f"{host}/orphan", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as reader:
        before = len(proxied.counted.requests)
        auth = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
        for extra in ({}, {"X-Ocibridge-Forwarded": "1"}):  # forwarded here: never sent on
            answer = httpx.get(f"{reader}/api/models/acme/other", headers={**auth, **extra})
            assert answer.status_code == 503 and answer.headers["retry-after"] == "5", answer.text
        assert proxied.counted.requests[before:] == []  # the upstream not asked
