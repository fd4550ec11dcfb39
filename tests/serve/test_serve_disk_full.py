"""A full disk under serve's staging is the Hub's 507 with a reason, not a bare 500 that clients
retry (issue 76): serve's cache on a tmpfs too small for the upload, then made larger, and the
same upload lands. Needs root for the mount (as the suite does: scripts/test)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import HfApi
from serving import point_hub_at, serve_as_process
from test_serve_publish import ROOT

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "cache"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], capture_output=True,
                             text=True)
    assert mounted.returncode == 0, f"a tmpfs is needed (root): {mounted.stderr}"
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_is_a_507_and_the_upload_lands_once_there_is_room(tmp_path, small_disk, registry, unique_repo,
                                                                     monkeypatch):
    (tmp_path / "tokens.txt").write_text("w user=w write=*\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(small_disk)}
    data = os.urandom(6 * 1024 * 1024)
    with serve_as_process([f"{registry.host}/{unique_repo}", "--no-access-log", "--token-file",
                           str(tmp_path / "tokens.txt")], env, tmp_path / "serve.log") as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub", xet=True)
        monkeypatch.setenv("HF_XET_CLIENT_RETRY_MAX_ATTEMPTS", "1")
        api = HfApi(endpoint=url, token="w")
        api.create_repo("acme/full")
        with pytest.raises(Exception) as full:  # noqa: PT011 - hf_xet raises its own RuntimeError
            api.upload_file(path_or_fileobj=data, path_in_repo="w.bin", repo_id="acme/full")
        log = (tmp_path / "serve.log").read_text()
        assert "507" in str(full.value) or "Insufficient Storage" in str(full.value), str(full.value)[:500]
        assert "disk is full" in log and "Traceback" not in log, log[-3000:]
        assert api.list_repo_files("acme/full") == [".gitattributes"]  # nothing committed
        subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
        done = api.upload_file(path_or_fileobj=data, path_in_repo="w.bin", repo_id="acme/full")
        assert api.model_info("acme/full").sha == done.oid
        assert Path(api.hf_hub_download("acme/full", "w.bin")).read_bytes() == data
