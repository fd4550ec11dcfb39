"""When a proxy's fetched commit goes to the registry (issue 87): after the clients reading its
files are done, not beside them (ingest.py, ``StreamedFetch.readers_done``), against the real
processes of tests/proxy/test_serve_upstream.py (its fixture, shared: the upstream, the proxy, the
fault proxy in front of the registry)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi
from upstream_proxy import CLIENT_TOKEN, UP_TOKEN, Proxied, lfs_only  # noqa: F401 - autouse: over LFS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_the_push_waits_until_the_reader_of_the_fetched_file_is_done(proxied: Proxied):
    up = HfApi(endpoint=proxied.upstream, token=UP_TOKEN)
    up.create_repo("acme/paused")
    weights = os.urandom(16 << 20)  # more than loopback's socket buffers hold for a reader that waits
    sha = up.upload_file(path_or_fileobj=weights, path_in_repo="w.safetensors", repo_id="acme/paused").oid
    checked = Path(proxied.root / "proxy")
    url = f"{proxied.proxy}/acme/paused/resolve/main/w.safetensors"
    with httpx.stream("GET", url, headers={"Authorization": f"Bearer {CLIENT_TOKEN}"}, timeout=60) as answer:
        chunks = answer.iter_raw(1 << 16)
        got = [next(chunks)]
        until = time.monotonic() + 60
        while not any(checked.rglob(f"snapshots/{sha}/w.safetensors")):  # the fetch has it whole, checked
            assert time.monotonic() < until, "the fetch never ended"
            time.sleep(0.05)
        time.sleep(1.5)  # the reader still reading: nothing of the commit sent to the registry yet
        assert not proxied.stored.requests_matching(None, "/proxy/acme/paused/blobs/"), "pushed beside its reader"
        assert proxied.tags("proxy/acme/paused") == []
        got += list(chunks)
    assert b"".join(got) == weights
    proxied.landed("proxy/acme/paused", sha)  # and pushed once the reader was done
    assert proxied.ended("acme/paused", 1) == ["landed"]
