"""A file uploaded over Xet goes on to the registry while serve rebuilds it from its xorbs
(issue 55's speed: the commit's push then sends only the config and manifest), as an LFS upload
does: after huggingface_hub's preupload, before any commit, the registry holds the blob, under
the SHA-256 the shard named, and no tag moved."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from huggingface_hub import CommitOperationAdd, HfApi
from serving import point_hub_at
from test_serve_publish import MIB, blob_in, serve_process, tag_digest


def test_a_file_uploaded_over_xet_reaches_the_registry_before_its_commit(tmp_path, registry, unique_repo,
                                                                          monkeypatch):
    data = os.urandom(9 * MIB)  # above the relay's 8 MiB
    sha = hashlib.sha256(data).hexdigest()
    prefix = f"{registry.host}/{unique_repo}"
    with serve_process(tmp_path, prefix) as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub", xet=True)
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo("acme/relayed")
        added = CommitOperationAdd("w.bin", data)
        api.preupload_lfs_files("acme/relayed", additions=[added])
        assert blob_in(f"{prefix}/acme/relayed:latest", sha, len(data))
        assert tag_digest(f"{prefix}/acme/relayed:latest") is None
        # sent, not written: staged as held by the registry, no copy of it on serve's disk
        staging = tmp_path / "ocibridge-cache" / "serve" / "staging"
        assert (staging / "held" / sha).read_text() == str(len(data))
        assert not (staging / "sha256" / sha).exists()
        # and the commit names the registry's blob: the file comes back whole, and the record goes
        api.create_commit("acme/relayed", [added], commit_message="w")  # uploaded: not asked again
        got = api.hf_hub_download("acme/relayed", "w.bin", cache_dir=str(tmp_path / "read"))
        assert hashlib.sha256(Path(got).read_bytes()).hexdigest() == sha
        assert tag_digest(f"{prefix}/acme/relayed:latest") is not None and not (staging / "held" / sha).exists()
    # built and relayed as its xorb came, before the shard (issue 64), not rebuilt after it
    assert f"sha256:{sha} was built as its xorbs came" in (tmp_path / "serve.log").read_text()


def test_a_file_of_several_xorbs_is_sent_as_they_come_and_committed_from_the_registry(tmp_path, registry,
                                                                                        unique_repo, monkeypatch):
    """hf_xet cuts xorbs at 64 MiB: a larger file's first xorbs are built and sent before its
    last one and its shard come (the build ahead's main case), and the commit names the blob."""
    data = os.urandom(70 * MIB)
    sha = hashlib.sha256(data).hexdigest()
    prefix = f"{registry.host}/{unique_repo}"
    with serve_process(tmp_path, prefix) as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub", xet=True)
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo("acme/large")
        added = CommitOperationAdd("w.bin", data)
        api.preupload_lfs_files("acme/large", additions=[added])
        staging = tmp_path / "ocibridge-cache" / "serve" / "staging"
        assert (staging / "held" / sha).read_text() == str(len(data)) and not (staging / "sha256" / sha).exists()
        api.create_commit("acme/large", [added], commit_message="w")
        got = api.hf_hub_download("acme/large", "w.bin", cache_dir=str(tmp_path / "read"))
        assert hashlib.sha256(Path(got).read_bytes()).hexdigest() == sha
        assert not (staging / "held" / sha).exists()
    log = (tmp_path / "serve.log").read_text()
    assert log.count("xorb received") >= 2 and f"sha256:{sha} was built as its xorbs came" in log
