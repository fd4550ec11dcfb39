"""``HfFileSystem`` (fsspec, as datasets, pandas and polars read ``hf://`` paths) over serve, on a
repository with regular and LFS files and two branches (issue 75): ``ls``, ``info``,
``modified``, ``glob`` and ranged ``open`` each through the real huggingface_hub."""

from __future__ import annotations

import os
from typing import Any

import huggingface_hub
import pytest
from huggingface_hub import HfApi, HfFileSystem
from serving import point_hub_at

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
WEIGHTS = os.urandom(3 * 1024 * 1024)


def test_hf_file_system_reads_regular_and_lfs_files_on_two_branches(tmp_path, publishing_serve, monkeypatch):
    url = publishing_serve.url  # the shared one: acme/fs is this test's
    point_hub_at(monkeypatch, url, tmp_path / "hub")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    api = HfApi(endpoint=url, token="writer-token")
    repo = api.create_repo("acme/fs").repo_id
    api.upload_file(path_or_fileobj=b"hello\n", path_in_repo="docs/notes.txt", repo_id=repo)
    first = api.upload_file(path_or_fileobj=WEIGHTS, path_in_repo="model.safetensors", repo_id=repo).oid
    api.create_branch(repo, branch="dev")
    later = api.upload_file(path_or_fileobj=b"dev only\n", path_in_repo="docs/dev.txt", repo_id=repo,
                            revision="dev").oid
    fs = HfFileSystem(endpoint=url, token="reader-token")

    listed: dict[str, Any] = {e["name"]: e for e in fs.ls(repo, detail=True)}
    assert set(listed) == {f"{repo}/.gitattributes", f"{repo}/docs", f"{repo}/model.safetensors"}
    assert listed[f"{repo}/docs"]["type"] == "directory"
    lfs = fs.info(f"{repo}/model.safetensors")
    regular = fs.info(f"{repo}/docs/notes.txt")
    assert lfs["size"] == len(WEIGHTS) and lfs["lfs"]["sha256"] and regular["lfs"] is None
    assert fs.modified(f"{repo}/model.safetensors").isoformat().startswith(
        api.list_repo_commits(repo)[0].created_at.isoformat()[:19])
    assert sorted(fs.glob(f"{repo}/docs/*.txt")) == [f"{repo}/docs/notes.txt"]
    assert sorted(fs.glob(f"{repo}@dev/docs/*.txt")) == [f"{repo}@dev/docs/dev.txt", f"{repo}@dev/docs/notes.txt"]
    assert fs.info(f"{repo}@dev/docs/dev.txt")["size"] == len(b"dev only\n")
    info = fs.ls(f"{repo}@dev/docs", detail=True, expand_info=True)
    commits = {e["name"].rsplit("/", 1)[1]: e["last_commit"].oid for e in info}
    assert commits == {"dev.txt": later, "notes.txt": api.list_repo_commits(repo)[1].commit_id}
    with fs.open(f"{repo}/model.safetensors", "rb", block_size=64 * 1024) as f:  # ranged reads
        f.seek(1024 * 1024)
        assert f.read(100) == WEIGHTS[1024 * 1024:1024 * 1024 + 100]
    assert fs.cat_file(f"{repo}@{first}/docs/notes.txt") == b"hello\n"
    assert not fs.exists(f"{repo}/docs/dev.txt") and fs.exists(f"{repo}@dev/docs/dev.txt")
