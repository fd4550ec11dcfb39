"""A Xet upload announced by its preupload as one file (hubserver/xet/announced.py): a verified
xorb whose bytes end before that file's size is built, and sent to the registry, without waiting
for the next xorb to begin (hf_xet forms the next one first). Observed at the registry, behind a
proxy that records what serve asks of it; the shard still decides what is committed."""

from __future__ import annotations

import base64
import hashlib
import os
import time
from pathlib import Path

import httpx
from support.faultproxy import FaultProxy
from support.publishing import MIB, blob_in, serve_process
from test_serve_xet_ahead import AUTH, cas_of, commit, shard, xorb_of
from test_serve_xet_several import blob_uploads

from ocibridge.hubserver.xet.announced import Announced


def uploads_begun(proxy: FaultProxy) -> int:
    """Blob uploads serve began at the registry (a mount is none)."""
    return sum("mount=" not in r.path for r in proxy.requests_matching("POST", r"/blobs/uploads/"))


def test_a_xorb_inside_the_file_announced_goes_to_the_registry_before_the_next_begins(tmp_path: Path, registry,
                                                                                       unique_repo):
    first, second = os.urandom(9 * MIB), os.urandom(3 * MIB)
    data = first + second
    (x1, n1, c1), (x2, n2, c2) = xorb_of(first), xorb_of(second)
    with FaultProxy(registry) as proxy, serve_process(tmp_path, f"{proxy.host}/{unique_repo}") as url:
        post = cas_of(url, "acme/early")
        asked = {"files": [{"path": "w.bin", "size": len(data), "sample": base64.b64encode(data[:512]).decode()}]}
        answer = httpx.post(f"{url}/api/models/acme/early/preupload/main", headers=AUTH, json=asked, timeout=60)
        assert answer.json()["files"][0]["uploadMode"] == "lfs"
        before = uploads_begun(proxy)
        assert post(f"/v1/xorbs/default/{n1}", x1).status_code == 200
        deadline = time.monotonic() + 30  # no other xorb begins meanwhile
        while uploads_begun(proxy) == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert uploads_begun(proxy) == before + 1, proxy.requests  # the file's upload began with the first xorb

        assert post(f"/v1/xorbs/default/{n2}", x2).status_code == 200
        assert post("/v2/shards", shard([(n1, c1), (n2, c2)], data)).status_code == 200
        sha = hashlib.sha256(data).hexdigest()
        assert blob_in(f"{registry.host}/{unique_repo}/acme/early:latest", sha, len(data))  # before the commit
        assert commit(url, "acme/early", data).status_code == 200
        got = httpx.get(f"{url}/acme/early/resolve/main/w.bin", headers=AUTH, timeout=120)
        assert got.status_code == 200 and got.content == data
        begun, finished = blob_uploads(proxy.requests)
        assert begun == sum(finished.values()) and finished[f"sha256:{sha}"] == 1, proxy.requests  # none cut
    log = (tmp_path / "serve.log").read_text()
    assert f"sha256:{sha} was built as its xorbs came" in log, log


def test_only_an_upload_announced_as_one_file_says_its_size() -> None:
    announced = Announced()
    assert announced.size("acme/m") is None  # no preupload: the build waits for the next xorb, as before
    announced.files("acme/m", [5 * MIB])
    assert announced.size("acme/m") == 5 * MIB
    announced.files("acme/m", [5 * MIB, MIB])  # several: no file's size bounds the stream
    assert announced.size("acme/m") is None and announced.several("acme/m")
    announced.files("acme/m", [MIB])  # one more preupload of the same upload ends nothing
    assert announced.size("acme/m") is None
    announced.shard_came("acme/m")
    assert announced.size("acme/m") is None and not announced.several("acme/m")
    announced.files("acme/m", [7])
    announced.files("acme/m", [])  # a preupload of small files only: the announcement stands
    assert announced.size("acme/m") == 7
    announced.shard_came("acme/m")  # spent with its shard
    assert announced.size("acme/m") is None
