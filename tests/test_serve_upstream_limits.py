"""serve as a proxy of an upstream Hub that asks for a pause (429 with Retry-After): the whole proxy
obeys it at once. However many clients wait, the upstream receives one request per Retry-After
window; each client is answered the Hub's 503 with a Retry-After of what is left of the window;
once the window closed and the upstream answers again, huggingface_hub loads the model. The
upstream and the registry: tests/upstream_proxy.py's; the proxy is one of its own, in front of a
fault proxy that answers model_info with 429 and counts every request."""

from __future__ import annotations

import time
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
WINDOW = 3
#: clients asking at once, in each burst
CLIENTS = 24


def burst(proxy: str) -> list[httpx.Response]:
    """CLIENTS requests for the missing model's model_info, all at once."""
    url = f"{proxy}/api/models/{REPO}/revision/main"
    with ThreadPoolExecutor(CLIENTS) as pool, httpx.Client(timeout=60) as client:
        sent = [pool.submit(client.get, url, headers={"Authorization": f"Bearer {CLIENT_TOKEN}"})
                for _ in range(CLIENTS)]
        return [f.result() for f in sent]


def test_a_429_storm_reaches_the_upstream_once_per_retry_after_window(proxied: Proxied, tmp_path: Path):
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo(REPO)
    up.upload_file(path_or_fileobj=b'{"storm": 1}', path_in_repo="config.json", repo_id=REPO)
    (tmp_path / "serve").mkdir()
    with FaultProxy(proxied.upstream) as limited:
        limit = limited.add("GET", rf"/api/models/{REPO}/revision/", too_many_requests(WINDOW), times=None)
        flags = ["--upstream", limited.url, "--upstream-token-file", str(proxied.root / "up-token.txt")]
        with serve_over(proxied.registry, tmp_path / "serve", f"{CLIENT_TOKEN}\n",
                        lambda host: [f"{host}/storm", "--plain-http", *flags], HF_HUB_DISABLE_XET="1") as proxy:
            first = burst(proxy)
            opened = time.monotonic()
            again = burst(proxy)  # within the window: nothing is sent
            assert time.monotonic() - opened < WINDOW - 0.5, "the second burst came too late to judge"
            asked = limited.requests_matching("GET", rf"/api/models/{REPO}/")
            print(f"{2 * CLIENTS} clients within one window: {len(asked)} upstream request(s)")
            assert len(asked) == 1, [r.path for r in asked]
            for answer in first + again:
                assert answer.status_code == 503, (answer.status_code, answer.text)
                assert 1 <= int(answer.headers["retry-after"]) <= WINDOW, answer.headers
            time.sleep(WINDOW - (time.monotonic() - opened) + 0.3)  # the window closed
            later = burst(proxy)
            asked = limited.requests_matching("GET", rf"/api/models/{REPO}/")
            assert len(asked) == 2, [r.path for r in asked]  # one more: the upstream still says 429
            assert {a.status_code for a in later} == {503}
            time.sleep(WINDOW + 0.3)
            limit.times = limit.applied  # the upstream answers again
            loaded = huggingface_hub.hf_hub_download(REPO, "config.json", endpoint=proxy, token=CLIENT_TOKEN,
                                                     cache_dir=tmp_path / "hub")
            assert Path(loaded).read_bytes() == b'{"storm": 1}'
