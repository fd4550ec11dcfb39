"""A xorb request's commit is resolved once a while (xet/pinned.py), not at every request; who may
read the repository is still asked at every one (tests/serve/test_serve_xet_revoke.py across replicas)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
from huggingface_hub import hf_hub_download
from serving import point_hub_at, serving

from ocibridge.hubserver.xet import xorbs

MiB = 1 << 20


def test_xorb_requests_resolve_their_commit_once_and_ask_who_reads_each_time(registry, unique_repo, tmp_path,
                                                                              monkeypatch):
    from ocibridge.cli import main

    src = tmp_path / "m"
    src.mkdir()
    data = os.urandom(xorbs.XORB_CHUNKS * xorbs.XET_CHUNK + 7)  # two xorbs (64 MiB and 7 bytes)
    (src / "model.safetensors").write_bytes(data)
    prefix = f"{registry.host}/{unique_repo}"
    assert main(["push", str(src), f"{prefix}/acme/p:latest", "-q", "--chunks", "--chunk-threshold", "1M"]) == 0
    with serving([prefix], xet_min=MiB) as served:
        routes = served.app.state.serve.xet
        pinned: list[str] = []  # commits a xorb request resolved
        asked: list[str] = []
        real_put, real_reads = routes.pinned.put, routes.still_reads

        def put(repo_id, commit, *rest):  # type: ignore[no-untyped-def]
            pinned.append(commit)
            return real_put(repo_id, commit, *rest)

        def reads(client, repo_id):  # type: ignore[no-untyped-def]
            asked.append(repo_id)
            real_reads(client, repo_id)

        monkeypatch.setattr(routes.pinned, "put", put)
        monkeypatch.setattr(routes, "still_reads", reads)
        point_hub_at(monkeypatch, served.url, tmp_path / "a", xet=True)
        assert Path(hf_hub_download("acme/p", "model.safetensors")).read_bytes() == data
        first = len(pinned)
        assert 1 <= first <= 3  # the first requests, at once, before one had it resolved
        asked.clear()
        served.requests.clear()
        point_hub_at(monkeypatch, served.url, tmp_path / "b", xet=True)
        assert Path(hf_hub_download("acme/p", "model.safetensors")).read_bytes() == data
        xorb_gets = [p for m, p in served.requests if "/xorbs/" in p]
        assert len(xorb_gets) >= 2 and len(pinned) == first  # resolved none again
        assert len(asked) >= len(xorb_gets)  # but asked who reads at each
        # a xorb past the file's last: refused, after who reads was asked, resolving nothing
        asked.clear()
        gone = httpx.get(served.url + xorb_gets[0].rsplit("/", 1)[0] + f"/{xorbs.ISSUED.xorb_count(len(data))}")
        assert gone.status_code in (401, 404) and len(pinned) == first and asked == ["acme/p"]
