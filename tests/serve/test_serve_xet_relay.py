"""A file uploaded over Xet goes on to the registry while serve rebuilds it from its xorbs
(issue 55's speed: the commit's push then sends only the config and manifest), as an LFS upload
does: after huggingface_hub's preupload, before any commit, the registry holds the blob, under
the SHA-256 the shard named, and no tag moved."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi
from serving import point_hub_at
from support.publishing import MIB, blob_in, serve_process, tag_digest

from ocibridge.stores.layout import LayoutStore


@pytest.mark.parametrize(("size_mib", "xorbs"), [(9, 1), (70, 2)], ids=["one-xorb", "several-xorbs"])
def test_a_file_uploaded_over_xet_reaches_the_registry_before_its_commit(tmp_path, registry, unique_repo,
                                                                          monkeypatch, size_mib, xorbs):
    """Above the relay's 8 MiB, in one xorb (built once its shard came) or in several (hf_xet
    cuts them at 64 MiB: the first are built and sent before the last one and the shard come,
    the build ahead's main case). Sent, not written: staged as held by the registry, with no copy
    of it on serve's disk, and the commit, by a serve started again, names the registry's blob."""
    data = os.urandom(size_mib * MIB)
    sha = hashlib.sha256(data).hexdigest()
    prefix = f"{registry.host}/{unique_repo}"
    with serve_process(tmp_path, prefix) as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub", xet=True)
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo("acme/relayed")
        first = tag_digest(f"{prefix}/acme/relayed:latest")  # create_repo's
        assert first is not None
        added = CommitOperationAdd("w.bin", data)
        api.preupload_lfs_files("acme/relayed", additions=[added])
        assert blob_in(f"{prefix}/acme/relayed:latest", sha, len(data))
        assert tag_digest(f"{prefix}/acme/relayed:latest") == first  # still the first commit: no new one
        staging = tmp_path / "ocibridge-cache" / "serve" / "staging"
        assert (staging / "held" / sha).read_text() == str(len(data))
        assert not (staging / "sha256" / sha).exists()
    # built and relayed as its xorbs came, before the shard (issue 64), not rebuilt after it
    log = (tmp_path / "serve.log").read_text()
    assert log.count("xorb received") >= xorbs and f"sha256:{sha} was built as its xorbs came" in log
    with serve_process(tmp_path, prefix) as url:  # serve restarted between the upload and its commit
        point_hub_at(monkeypatch, url, tmp_path / "hub", xet=True)
        api = HfApi(endpoint=url, token="writer-token")
        # the file comes back whole, and the record goes with the commit
        api.create_commit("acme/relayed", [added], commit_message="w")  # uploaded: not asked again
        got = api.hf_hub_download("acme/relayed", "w.bin", cache_dir=str(tmp_path / "read"))
        assert hashlib.sha256(Path(got).read_bytes()).hexdigest() == sha
        assert tag_digest(f"{prefix}/acme/relayed:latest") not in (None, first)
        assert not (staging / "held" / sha).exists()


def test_a_file_the_registry_took_as_it_came_takes_no_room_in_the_staging_budget(tmp_path, registry, unique_repo,
                                                                                   monkeypatch):
    """``--staging-budget`` bounds what uploads keep on serve's disk. A file sent on to the
    registry as its xorbs came keeps nothing there, so a budget smaller than the file takes it
    (it was refused with 507: the build ahead stopped at the budget, and the rebuild after the
    shard reserved the whole file). Over a layout, where the file is written, the same budget
    still refuses it, with nothing staged."""
    data = os.urandom(70 * MIB)
    sha = hashlib.sha256(data).hexdigest()
    prefix = f"{registry.host}/{unique_repo}"
    with serve_process(tmp_path, prefix, "--staging-budget", "32M") as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub", xet=True)
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo("acme/large")
        api.upload_file(path_or_fileobj=data, path_in_repo="w.bin", repo_id="acme/large")
        got = api.hf_hub_download("acme/large", "w.bin", cache_dir=str(tmp_path / "read"))
        assert hashlib.sha256(Path(got).read_bytes()).hexdigest() == sha
    assert f"sha256:{sha} was built as its xorbs came" in (tmp_path / "serve.log").read_text()

    layout = tmp_path / "layout"
    LayoutStore(layout, create=True)
    with serve_process(tmp_path, f"oci:{layout}", "--staging-budget", "32M") as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub2", xet=True)
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo("acme/large")
        with pytest.raises(Exception, match="507 Insufficient Storage"):  # hf_xet's words: the shard refused
            api.upload_file(path_or_fileobj=data, path_in_repo="w.bin", repo_id="acme/large")
    staging = tmp_path / "ocibridge-cache" / "serve" / "staging"
    assert not (staging / "sha256" / sha).exists() and not (staging / "held" / sha).exists()
