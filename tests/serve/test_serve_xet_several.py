"""An upload of several files over Xet (``upload_folder``): hf_xet packs their chunks into shared
xorbs, so serve's build ahead of the shard (hubserver/xet/ahead.py) must not take the stream for
one file, build it and send it to the registry, only to rebuild every file once the shard names
them. The preupload announced several files: nothing is built ahead, the registry (behind a
proxy that records what serve asks of it) takes each file once and no blob upload is begun and
left unfinished, and the files come back byte for byte. A single file uploaded next is built
ahead again."""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from huggingface_hub import HfApi
from serving import point_hub_at
from support.faultproxy import FaultProxy, RecordedRequest
from support.publishing import MIB, blob_in, serve_process

pytest.importorskip("hf_xet")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def blob_uploads(requests: list[RecordedRequest]) -> tuple[int, Counter[str]]:
    """The blob uploads serve began at the registry (a mount is none), and the digests of those
    it finished, each with how many times."""
    begun, finished = 0, Counter[str]()
    for r in requests:
        parts = urlsplit(r.path)
        if "/blobs/uploads/" not in parts.path:
            continue
        query = parse_qs(parts.query)
        if r.method == "POST" and "mount" not in query:
            begun += 1
        if r.method in ("PUT", "POST") and "digest" in query:
            finished[query["digest"][0]] += 1
    return begun, finished


def test_an_upload_of_several_files_is_not_built_ahead_as_one(tmp_path: Path, registry, unique_repo, monkeypatch):
    folder = tmp_path / "shards"
    folder.mkdir()
    files = {f"data/train-{i:05d}.parquet": os.urandom(30 * MIB) for i in range(3)}  # past one xorb together
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    single = os.urandom(20 * MIB)
    with FaultProxy(registry) as proxy, serve_process(tmp_path, f"{proxy.host}/{unique_repo}") as url:
        prefix = f"{registry.host}/{unique_repo}"
        point_hub_at(monkeypatch, url, tmp_path / "hub", xet=True)
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo("acme/several")
        api.upload_folder(folder_path=str(folder), repo_id="acme/several")
        begun, finished = blob_uploads(proxy.requests)
        assert begun == sum(finished.values()), proxy.requests  # none begun and cut
        for data in files.values():
            assert finished[f"sha256:{hashlib.sha256(data).hexdigest()}"] == 1, finished
        log = (tmp_path / "serve.log").read_text()
        assert log.count("xorb received") >= 2, log  # several xorbs: a stream the build ahead would take
        assert "is not taken" not in log, log  # nothing built ahead for nothing, nor sent to the registry
        assert "was built as its xorbs came" not in log, log
        for name, data in files.items():
            got = api.hf_hub_download("acme/several", name, cache_dir=str(tmp_path / "read"))
            assert Path(got).read_bytes() == data
            assert blob_in(f"{prefix}/acme/several:latest", hashlib.sha256(data).hexdigest(), len(data))

        # the announcement is spent with its shard: one file next is built as its xorbs come
        api.upload_file(path_or_fileobj=single, path_in_repo="single.bin", repo_id="acme/several")
        got = api.hf_hub_download("acme/several", "single.bin", cache_dir=str(tmp_path / "read"))
        assert Path(got).read_bytes() == single
    log = (tmp_path / "serve.log").read_text()
    assert f"sha256:{hashlib.sha256(single).hexdigest()} was built as its xorbs came" in log, log
    assert "is not taken" not in log, log
