"""A file uploaded over Xet goes on to the registry while serve rebuilds it from its xorbs
(issue 55's speed: the commit's push then sends only the config and manifest), as an LFS upload
does: after huggingface_hub's preupload, before any commit, the registry holds the blob, under
the SHA-256 the shard named, and no tag moved."""

from __future__ import annotations

import hashlib
import os

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
        api.preupload_lfs_files("acme/relayed", additions=[CommitOperationAdd("w.bin", data)])
        assert blob_in(f"{prefix}/acme/relayed:latest", sha, len(data))
        assert tag_digest(f"{prefix}/acme/relayed:latest") is None
    # built and relayed as its xorb came, before the shard (issue 64), not rebuilt after it
    assert f"sha256:{sha} was built as its xorbs came" in (tmp_path / "serve.log").read_text()
