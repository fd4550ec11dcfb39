"""Xet for every file in git-lfs of a commit serve made, whatever its size (issue 75): the Hub keeps
every such file in Xet, and huggingface_hub reads ``xet_file_data`` (``X-Xet-Hash`` and the refresh
route) to hand it to hf_xet and to skip the per-file HEAD of ``snapshot_download``. A file pushed
outside serve keeps ``--xet-min-size``; a regular file is never in Xet."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url, snapshot_download
from serving import point_hub_at

from ocibridge.cli import main
from tests.modelgen import make_bert_model

pytest.importorskip("hf_xet")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_a_small_file_published_through_serve_is_offered_over_xet(tmp_path, publishing_serve, monkeypatch):
    url, prefix = publishing_serve.url, publishing_serve.prefix  # the shared one: acme/small and acme/pushed are ours
    assert main(["push", str(make_bert_model(tmp_path / "pushed")), f"{prefix}/acme/pushed:latest", "-q"]) == 0
    point_hub_at(monkeypatch, url, tmp_path / "hub", xet=True)
    api = HfApi(endpoint=url, token="writer-token")
    api.create_repo("acme/small")
    api.upload_file(path_or_fileobj=b"\x00binary, in git-lfs" * 10, path_in_repo="file.bin", repo_id="acme/small")
    api.upload_file(path_or_fileobj=b"a regular file\n", path_in_repo="notes.txt", repo_id="acme/small")
    small = get_hf_file_metadata(hf_hub_url("acme/small", "file.bin", endpoint=url), token="reader-token")
    assert small.xet_file_data is not None and small.xet_file_data.refresh_route
    regular = get_hf_file_metadata(hf_hub_url("acme/small", "notes.txt", endpoint=url), token="reader-token")
    assert regular.xet_file_data is None
    got = Path(snapshot_download("acme/small", token="reader-token"))
    assert (got / "file.bin").read_bytes() == b"\x00binary, in git-lfs" * 10  # through hf_xet
    entries = {e.path: e for e in api.list_repo_tree("acme/small")}
    assert entries["file.bin"].xet_hash == small.xet_file_data.file_hash
    assert getattr(entries["notes.txt"], "xet_hash", None) is None
    pushed = get_hf_file_metadata(hf_hub_url("acme/pushed", "config.json", endpoint=url), token="reader-token")
    assert pushed.xet_file_data is None  # pushed outside serve, under --xet-min-size: plain


def test_anonymous_reads_go_over_xet_too(tmp_path, registry, unique_repo, monkeypatch):
    """With an ``anonymous read=`` line, a request without a token is handed a Xet token too, and
    hf_xet's reconstructions and xorbs take it (the refresh route is asked as resolve was: with no
    token); a private repository's stays refused."""
    import os

    from serving import serve_as_process
    from test_serve_publish import ROOT

    (tmp_path / "tokens.txt").write_text("w user=w write=*\nanonymous read=*\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(tmp_path / "cache")}
    with serve_as_process([f"{registry.host}/{unique_repo}", "--no-access-log", "--token-file",
                           str(tmp_path / "tokens.txt")], env, tmp_path / "serve.log") as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub", xet=True)
        writer = HfApi(endpoint=url, token="w")
        writer.create_repo("acme/open")
        writer.upload_file(path_or_fileobj=b"\x00open weights" * 100, path_in_repo="w.bin", repo_id="acme/open")
        got = Path(snapshot_download("acme/open", token=False))
        assert (got / "w.bin").read_bytes() == b"\x00open weights" * 100
        log = (tmp_path / "serve.log").read_text()
        assert "Traceback" not in log
