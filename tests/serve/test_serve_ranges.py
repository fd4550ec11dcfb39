"""Ranges of a file the model cache does not hold yet, answered from verified chunks when the
manifest binds a chunk table (``push --chunks``), instead of fetching the whole blob first:
the bytes the registry sends are counted on a proxy in front of it."""

from __future__ import annotations

import hashlib
import os
import time

import httpx
import pytest
from huggingface_hub import HfFileSystem
from serving import own_settings, point_hub_at, serving
from support.faultproxy import corrupt
from support.fixtures import new_repo

import ocibridge
from ocibridge.cli import main

MiB = 1 << 20
SIZE = 64 * MiB


def blob_bytes(proxy) -> int:
    return sum(r.response_bytes for r in proxy.requests_matching("GET", "/blobs/"))


@pytest.fixture(scope="module")
def big(tmp_path_factory, registry):
    """acme/big (a chunk table) and acme/plain (none) under a prefix of their own, pushed once for
    the module: the tests read them, each through a serve and fault proxy of its own."""
    root = tmp_path_factory.mktemp("ranges")
    src = root / "big"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "bert"}')
    data = os.urandom(SIZE)
    (src / "model.safetensors").write_bytes(data)
    repo = new_repo()
    with own_settings(root):
        ocibridge.push(str(src), f"{registry.host}/{repo}/acme/big:latest")
        plain = f"{registry.host}/{repo}/acme/plain:latest"
        assert main(["push", str(src), plain, "--no-chunks", "-q"]) == 0  # tables are the default from 64 MiB
    return data, repo


def test_a_ranged_read_moves_a_few_chunks_not_the_blob(big, fault_proxy, monkeypatch, tmp_path):
    data, repo = big
    with serving([f"{fault_proxy.host}/{repo}"]) as served:
        point_hub_at(monkeypatch, served.url, tmp_path / "hub")
        fs = HfFileSystem(skip_instance_cache=True)
        fault_proxy.clear()
        with fs.open("acme/big/model.safetensors", "rb") as f:
            f.seek(40 * MiB + 12345)
            assert f.read(100_000) == data[40 * MiB + 12345:40 * MiB + 112_345]
        moved = blob_bytes(fault_proxy)
        # HfFileSystem reads a 5 MiB block: 6 chunks of 1 MiB, the table and the config (6.0 MiB)
        assert 0 < moved <= 8 * MiB, moved
        # no whole blob of the weights (model_info reads the small config.json whole: the one fetched)
        assert served.blobs.fetched <= 1
        weights = hashlib.sha256(data).hexdigest()
        assert not served.blobs.cache.blobs.blob_path(f"sha256:{weights}").exists()

        fault_proxy.clear()  # asked again: the verified chunks are in the model cache
        r = httpx.get(f"{served.url}/acme/big/resolve/main/model.safetensors",
                      headers={"Range": f"bytes={40 * MiB}-{40 * MiB + 999}"})
        assert r.status_code == 206 and r.content == data[40 * MiB:40 * MiB + 1000]
        assert blob_bytes(fault_proxy) == 0

        fault_proxy.clear()  # no chunk table: the whole blob, verified (the range is sent as it arrives)
        r = httpx.get(f"{served.url}/acme/plain/resolve/main/model.safetensors",
                      headers={"Range": "bytes=100-199"})
        assert r.status_code == 206 and r.content == data[100:200]
        before = served.blobs.fetched
        deadline = time.monotonic() + 60
        while served.blobs.fetched == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert served.blobs.fetched == before + 1
        assert blob_bytes(fault_proxy) >= SIZE


def test_a_chunk_that_does_not_match_its_table_cuts_the_answer(big, fault_proxy, monkeypatch, tmp_path):
    data, repo = big
    with serving([f"{fault_proxy.host}/{repo}"]) as served:
        layer = hashlib.sha256(data).hexdigest()  # a raw layer's blob is the file
        fault_proxy.add("GET", rf"/blobs/sha256:{layer}", corrupt(offset=10), times=None)
        with pytest.raises(httpx.HTTPError):
            r = httpx.get(f"{served.url}/acme/big/resolve/main/model.safetensors",
                          headers={"Range": f"bytes={8 * MiB}-{9 * MiB - 1}"})
            assert r.content != data[8 * MiB:9 * MiB]  # (not reached: the connection is cut)
            raise AssertionError(f"{r.status_code} answered in full")
