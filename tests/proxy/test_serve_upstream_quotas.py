"""What the proxy may be made to fetch (serve --upstream with --quotas, --upstream-max-size,
--upstream-quota-namespace; docs/quotas.md): an ingest larger than the flag is refused on the
upstream's listing before a file is asked of it; anonymous requests for many unknown repositories
start at most the ingests an hour allows; what was fetched counts against the namespace named.
The upstream and its counting fault proxy: the session's (tests/upstream_proxy.py); the proxy
here is a serve of its own over another prefix of the same registry."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi
from serving import serve_over
from upstream_proxy import (
    CLIENT_TOKEN,
    UP_TOKEN,
    Proxied,
    lfs_only,  # noqa: F401 - autouse: every test here over LFS
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PER_HOUR = 3
REPOS = 40
QUOTAS = f'[namespaces.proxied]\nbytes = "1G"\n\n[upstream]\ningests-per-hour = {PER_HOUR}\n'


@pytest.fixture(scope="module")
def limited(proxied: Proxied, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A proxy of the session's upstream whose ingests are limited; (its URL, its folder)."""
    root = tmp_path_factory.mktemp("limited")
    (root / "quotas.toml").write_text(QUOTAS)
    flags = ["--upstream", proxied.counted.url, "--upstream-token-file", str(proxied.root / "up-token.txt"),
             "--upstream-max-size", "1M", "--upstream-quota-namespace", "proxied", "--upstream-allow-pickle",
             "--quotas", str(root / "quotas.toml"), "--audit-log", str(root / "audit.jsonl")]
    with serve_over(proxied.registry, root, f"{CLIENT_TOKEN}\nanonymous read=*\n",
                    lambda host: [f"{host}/limited", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as url:
        yield url, root


def ingests(root: Path, prefix: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in (root / "audit.jsonl").read_text().splitlines()]
    return [e for e in lines if e["action"] == "upstream_ingest" and str(e["repository"]).startswith(prefix)]


def test_an_ingest_larger_than_the_max_size_is_refused_before_a_file_is_fetched(
        proxied: Proxied, limited: tuple[str, Path]):
    url, root = limited
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("big/one", exist_ok=True)
    up.upload_file(path_or_fileobj=b"\x00" * (2 * 1024 * 1024), path_in_repo="w.safetensors", repo_id="big/one")
    answer = httpx.get(f"{url}/big/one/resolve/main/w.safetensors", timeout=60,
                       headers={"authorization": f"Bearer {CLIENT_TOKEN}"})
    assert answer.status_code == 403, answer.text
    assert answer.headers.get("x-error-code") is None  # a quota's, not a gate's
    assert "more than one ingest may (1.0 MiB: --upstream-max-size)" in answer.headers["x-error-message"]
    assert proxied.asked("big/one/tree")  # the listing, which gives the sizes, was asked
    assert proxied.asked("big/one/resolve") == []  # no file was: not a byte of it fetched
    assert proxied.tags("limited/big/one") == []
    assert [e["outcome"] for e in ingests(root, "big/one")] == ["refused"]


def test_anonymous_requests_for_many_unknown_repositories_start_at_most_the_hours_ingests(
        proxied: Proxied, limited: tuple[str, Path]):
    url, root = limited
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    with ThreadPoolExecutor(max_workers=8) as pool:  # each with the Hub's first commit: a .gitattributes to fetch
        list(pool.map(lambda i: up.create_repo(f"many/r{i}", exist_ok=True), range(REPOS)))
    statuses = [httpx.get(f"{url}/api/models/many/r{i}/revision/main", timeout=60).status_code
                for i in range(REPOS)]
    assert statuses.count(200) == PER_HOUR and statuses.count(429) == REPOS - PER_HOUR, statuses
    asked = {re.sub(r"/resolve/.*", "", path) for path in proxied.asked("/resolve/") if "/many/r" in path}
    assert len(asked) == PER_HOUR  # the upstream gave the files of three repositories, no more
    assert sum(1 for e in ingests(root, "many/") if e["outcome"] == "landed") == PER_HOUR
    rate = httpx.get(f"{url}/api/models/many/r{REPOS - 1}/revision/main")
    assert rate.status_code == 429 and int(rate.headers["retry-after"]) > 0
    assert "ingests-per-hour" in rate.headers["x-error-message"]
    # what the proxy fetched counts against the namespace the operator named, not many's
    page = httpx.get(f"{url}/metrics").text
    assert re.search(rf'^ocibridge_serve_namespace_repos{{namespace="proxied"}} {PER_HOUR}\.0$', page, re.M), page
    assert 'namespace="many"' not in page


def test_an_ingest_is_refused_while_the_namespace_it_counts_against_is_full(
        proxied: Proxied, limited: tuple[str, Path]):
    url, root = limited
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("full/one", exist_ok=True)
    auth = {"authorization": f"Bearer {CLIENT_TOKEN}"}
    (root / "quotas.toml").write_text('[namespaces.proxied]\nbytes = 1\n')  # 1 byte: full, or by the first file
    time.sleep(1.2)  # serve looks at the file again within a second
    try:
        answer = httpx.get(f"{url}/full/one/resolve/main/.gitattributes", headers=auth, timeout=60)
        assert answer.status_code == 403, answer.text
        assert "Storage limit reached: the namespace proxied" in answer.headers["x-error-message"]
        assert proxied.asked("full/one/resolve") == [] and proxied.tags("limited/full/one") == []
    finally:
        (root / "quotas.toml").write_text(QUOTAS)
