"""A large file uploaded over LFS goes on to the registry as it arrives, handed over in memory
(uploads/relay.py's ``Handed``, issue 64): it is never written on serve's disk, it is staged as
held by the registry, and the commit names the registry's blob. A registry that fails the upload
midway is a 502, which huggingface_hub answers by sending the file again."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi
from serving import point_hub_at
from support.faultproxy import FaultProxy, drop_request
from support.publishing import MIB, blob_in, serve_process, tag_digest

from ocibridge.stores.layout import LayoutStore


def _lfs_writer(monkeypatch: pytest.MonkeyPatch, url: str, hub: Path, repo: str | None = None) -> HfApi:
    """huggingface_hub over LFS (HF_HUB_DISABLE_XET=1) pointed at serve, as its writer; ``repo`` made."""
    point_hub_at(monkeypatch, url, hub, xet=False)
    api = HfApi(endpoint=url, token="writer-token")
    if repo is not None:
        api.create_repo(repo)
    return api


def _reads_back(api: HfApi, repo: str, sha: str, cache: Path) -> None:
    got = api.hf_hub_download(repo, "w.bin", cache_dir=str(cache))
    assert hashlib.sha256(Path(got).read_bytes()).hexdigest() == sha


def test_a_large_lfs_upload_reaches_the_registry_and_is_never_written_here(tmp_path, registry, unique_repo,
                                                                           monkeypatch):
    data = os.urandom(20 * MIB)
    sha = hashlib.sha256(data).hexdigest()
    prefix = f"{registry.host}/{unique_repo}"
    staging = tmp_path / "ocibridge-cache" / "serve" / "staging"
    with serve_process(tmp_path, prefix) as url:
        api = _lfs_writer(monkeypatch, url, tmp_path / "hub", "acme/handed")
        first = tag_digest(f"{prefix}/acme/handed:latest")  # create_repo's
        assert first is not None
        added = CommitOperationAdd("w.bin", data)
        api.preupload_lfs_files("acme/handed", additions=[added])
        assert blob_in(f"{prefix}/acme/handed:latest", sha, len(data))
        assert tag_digest(f"{prefix}/acme/handed:latest") == first  # still the first commit: no new one
        assert (staging / "held" / sha).read_text() == str(len(data))
        assert not (staging / "sha256" / sha).exists()
        written = [p for p in staging.rglob("*") if p.is_file() and p.stat().st_size >= MIB]
        assert written == [], written  # no copy of it on serve's disk, nor half of one
    with serve_process(tmp_path, prefix) as url:  # serve restarted between the upload and its commit
        api = _lfs_writer(monkeypatch, url, tmp_path / "hub")
        api.create_commit("acme/handed", [added], commit_message="w")  # uploaded: not asked again
        _reads_back(api, "acme/handed", sha, tmp_path / "read")
        assert tag_digest(f"{prefix}/acme/handed:latest") not in (None, first)


def test_a_registry_that_fails_the_upload_midway_is_a_502_and_the_client_sends_it_again(tmp_path, registry,
                                                                                      unique_repo, monkeypatch):
    data = os.urandom(12 * MIB)
    sha = hashlib.sha256(data).hexdigest()
    with FaultProxy(registry) as proxy:
        prefix = f"{proxy.host}/{unique_repo}"
        with serve_process(tmp_path, prefix) as url:
            api = _lfs_writer(monkeypatch, url, tmp_path / "hub", "acme/retried")  # its first commit made
            proxy.add("PUT", r"/blobs/uploads/", drop_request(after=2 * MIB))  # the next upload is cut
            api.upload_file(path_or_fileobj=data, path_in_repo="w.bin", repo_id="acme/retried")
            _reads_back(api, "acme/retried", sha, tmp_path / "read")
    log = (tmp_path / "serve.log").read_text()
    assert log.count(f"did not take the upload of sha256:{sha}") == 1, log[-3000:]
    # the 502 says what the registry did (the upload cut), not that the relay could not start it over,
    # and the relay's line does not say that a commit's push sends the bytes serve does not keep
    told = next(line for line in log.splitlines() if f"did not take the upload of sha256:{sha}" in line)
    assert "was interrupted (" in told, told
    assert "the commit's push sends it" not in log, log[-3000:]
    assert blob_in(f"{registry.host}/{unique_repo}/acme/retried:latest", sha, len(data))


def test_a_relayed_lfs_upload_takes_no_room_in_the_staging_budget(tmp_path, registry, unique_repo, monkeypatch):
    """``--staging-budget`` bounds what uploads keep on serve's disk; a large LFS upload keeps
    nothing there, so a budget smaller than the file takes it. Over a layout, where the file is
    staged, the same budget refuses it (507, before a byte is sent)."""
    data = os.urandom(40 * MIB)
    sha = hashlib.sha256(data).hexdigest()
    with serve_process(tmp_path, f"{registry.host}/{unique_repo}", "--staging-budget", "16M") as url:
        api = _lfs_writer(monkeypatch, url, tmp_path / "hub", "acme/large")
        api.upload_file(path_or_fileobj=data, path_in_repo="w.bin", repo_id="acme/large")
        _reads_back(api, "acme/large", sha, tmp_path / "read")

    layout = tmp_path / "layout"
    LayoutStore(layout, create=True)
    with serve_process(tmp_path, f"oci:{layout}", "--staging-budget", "16M") as url:
        api = _lfs_writer(monkeypatch, url, tmp_path / "hub2", "acme/large")
        with pytest.raises(Exception, match="507"):
            api.upload_file(path_or_fileobj=data, path_in_repo="w.bin", repo_id="acme/large")
