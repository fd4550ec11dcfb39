"""serve as a proxy of an upstream Hub that asks for a pause (429 with Retry-After): the whole proxy
obeys it at once. However many clients wait, the upstream receives one request per Retry-After
window; each client is answered the Hub's 503 with a Retry-After of what is left of the window;
once the window closed and the upstream answers again, huggingface_hub loads the model. The
upstream and the registry: tests/upstream_proxy.py's; the proxy is one of its own, in front of a
fault proxy that answers model_info with 429 and counts every request."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serving import serve_over
from support.faultproxy import FaultProxy, too_many_requests
from upstream_proxy import (
    CLIENT_TOKEN,
    UP_TOKEN,
    Proxied,
    lfs_only,  # noqa: F401 - autouse: every test here over LFS
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

REPO = "acme/storm"
#: seconds the stand-in's 429 asks for
WINDOW = 5
#: clients asking at once, in each burst
CLIENTS = 24


def burst(proxy: str) -> list[httpx.Response]:
    """CLIENTS requests for the missing model's model_info, all at once."""
    url = f"{proxy}/api/models/{REPO}/revision/main"
    with ThreadPoolExecutor(CLIENTS) as pool, httpx.Client(timeout=60) as client:
        sent = [pool.submit(client.get, url, headers={"Authorization": f"Bearer {CLIENT_TOKEN}"})
                for _ in range(CLIENTS)]
        return [f.result() for f in sent]


@pytest.fixture(scope="module")
def limited(proxied: Proxied, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FaultProxy, str]]:
    """A proxy of its own, whose upstream is behind a fault proxy the tests script: (it, the proxy's URL).
    Its prefix is its own too: test_serve_upstream_quotas counts the repositories under ``/limited``."""
    root = tmp_path_factory.mktemp("limited")
    with FaultProxy(proxied.upstream) as limiting:
        flags = ["--upstream", limiting.url, "--upstream-token-file", str(proxied.root / "up-token.txt")]
        with serve_over(proxied.registry, root, f"{CLIENT_TOKEN}\n",
                        lambda host: [f"{host}/paused", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as proxy:
            yield limiting, proxy


def published(proxied: Proxied, repo_id: str, body: bytes) -> str:
    """``repo_id`` made at the upstream with one file; its commit."""
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo(repo_id)
    return str(up.upload_file(path_or_fileobj=body, path_in_repo="config.json", repo_id=repo_id).oid)


def test_a_429_storm_reaches_the_upstream_once_per_retry_after_window(proxied: Proxied, limited: tuple[FaultProxy, str],
                                                                     tmp_path: Path):
    published(proxied, REPO, b'{"storm": 1}')
    limiting, proxy = limited
    limit = limiting.add("GET", rf"/api/models/{REPO}/revision/", too_many_requests(WINDOW), times=None)
    first = burst(proxy)
    opened = time.monotonic()
    again = burst(proxy)  # within the window: nothing is sent
    between = time.monotonic() - opened
    asked = limiting.requests_matching("GET", rf"/api/models/{REPO}/")
    print(f"{2 * CLIENTS} clients within one window: {len(asked)} upstream request(s)")
    assert len(asked) == 1, (f"{len(asked)} upstream requests; the second burst ended {between:.1f} s into the "
                             f"{WINDOW} s window", [r.path for r in asked])
    for answer in first + again:
        assert answer.status_code == 503, (answer.status_code, answer.text)
        assert 1 <= int(answer.headers["retry-after"]) <= WINDOW, answer.headers
    time.sleep(WINDOW - (time.monotonic() - opened) + 0.3)  # the window closed
    later = burst(proxy)
    asked = limiting.requests_matching("GET", rf"/api/models/{REPO}/")
    assert len(asked) == 2, [r.path for r in asked]  # one more: the upstream still says 429
    assert {a.status_code for a in later} == {503}
    time.sleep(WINDOW + 0.3)
    limit.times = limit.applied  # the upstream answers again
    loaded = huggingface_hub.hf_hub_download(REPO, "config.json", endpoint=proxy, token=CLIENT_TOKEN,
                                             cache_dir=tmp_path / "hub")
    assert Path(loaded).read_bytes() == b'{"storm": 1}'


def test_a_fetch_that_meets_a_429_waits_it_out_and_lands(proxied: Proxied, limited: tuple[FaultProxy, str],
                                                        tmp_path: Path):
    """The commit list the fetch asks (its facts) answered 429 once: the fetch waits the second the
    upstream asked for and asks again, and lands (the client's first download got the file)."""
    repo_id = "acme/paused-by-429"
    commit = published(proxied, repo_id, b'{"paused": 1}')
    limiting, proxy = limited
    limiting.add("GET", rf"/api/models/{repo_id}/commits/", too_many_requests(1), times=1)
    loaded = huggingface_hub.hf_hub_download(repo_id, "config.json", endpoint=proxy, token=CLIENT_TOKEN,
                                             cache_dir=tmp_path / "hub")
    assert Path(loaded).read_bytes() == b'{"paused": 1}'
    proxied.named_main(f"paused/{repo_id}", commit)  # landed by the first fetch, main tagged
    commits = limiting.requests_matching("GET", rf"/api/models/{repo_id}/commits/")
    assert [r.status for r in commits] == [429, 200], [(r.path, r.status) for r in commits]
    assert commits[1].time - commits[0].time >= 0.9  # not before the upstream's second was over
