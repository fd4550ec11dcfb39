"""Issue 32: a push asks the registry for every blob before sending its bytes, whether or not
the local digest cache knows the file: a fresh copy of a directory, a touched file and a
re-cloned directory send no byte the registry holds. Counted on the wire (the fault proxy's
PATCH/PUT body bytes to ``/blobs/uploads/``); the summary counts each blob once."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

import ocibridge
from ocibridge.model.extract import fetch_manifest
from ocibridge.places.locate import open_target as open_store_target
from tests.modelgen import make_model


def _blob_bytes_sent(proxy) -> int:
    return sum(r.request_bytes for r in proxy.requests
               if r.method in ("PATCH", "PUT") and "/blobs/uploads/" in r.path)


def _blob_count(ref: str) -> int:
    return len(_digests(ref))


def _digests(ref: str) -> set[str]:
    target = open_store_target(ref)
    _, manifest = fetch_manifest(target.store, target.reference)
    return {d.digest for d in [manifest.config, *manifest.layers]}


def _sent_digests(proxy) -> set[str]:
    """The digests of blob uploads completed through ``proxy`` (``PUT …&digest=``)."""
    return {unquote(m.group(1)) for r in proxy.requests if r.method == "PUT"
            for m in [re.search(r"[?&]digest=([^&]+)", r.path)] if m}


def _adds_up(result, ref: str) -> None:
    s = result.stats
    assert s.blobs_copied + s.blobs_skipped + s.blobs_mounted == _blob_count(ref), s.as_dict()


@pytest.fixture()
def first_push(tmp_path, fault_proxy, unique_repo, monkeypatch):
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    model = make_model(tmp_path / "model")
    ref = f"{fault_proxy.host}/{unique_repo}:v1"
    result = ocibridge.push(str(model), ref)
    assert _blob_bytes_sent(fault_proxy) >= 400_000, "the first push sends the files"
    _adds_up(result, ref)
    fault_proxy.clear()
    return model, ref.rsplit(":", 1)[0]


def test_fresh_copy_sends_no_blob_byte(tmp_path, fault_proxy, first_push):
    model, repo = first_push
    copy = tmp_path / "elsewhere" / "model"  # same name: the same config, the same manifest
    shutil.copytree(model, copy)  # new inodes and times: the digest cache knows none of them
    result = ocibridge.push(str(copy), f"{repo}:v2")
    assert _blob_bytes_sent(fault_proxy) == 0
    assert result.stats.bytes_copied == 0 and result.stats.blobs_copied == 0
    _adds_up(result, f"{repo}:v2")


def test_touched_file_sends_no_blob_byte(fault_proxy, first_push):
    model, repo = first_push
    weights = model / "model.safetensors"
    st = weights.stat()
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    result = ocibridge.push(str(model), f"{repo}:touched")
    assert _blob_bytes_sent(fault_proxy) == 0
    _adds_up(result, f"{repo}:touched")


def test_recloned_directory_sends_no_blob_byte(tmp_path, fault_proxy, first_push):
    model, repo = first_push
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    origin = tmp_path / "origin"
    shutil.copytree(model, origin)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "model"]):
        subprocess.run([*git, *args], cwd=origin, check=True)
    clone = tmp_path / "clone" / "model"
    subprocess.run([*git, "clone", "-q", str(origin), str(clone)], check=True)
    shutil.rmtree(clone / ".git")
    result = ocibridge.push(str(clone), f"{repo}:cloned")
    assert _blob_bytes_sent(fault_proxy) == 0
    _adds_up(result, f"{repo}:cloned")


def test_copy_under_another_name_sends_only_its_config(tmp_path, fault_proxy, first_push):
    """``cp -r model model-copy``: the name is in the config, so the config is new; no layer
    the repository holds goes again."""
    model, repo = first_push
    held = _digests(f"{repo}:v1")
    copy = tmp_path / "model-copy"
    shutil.copytree(model, copy)
    result = ocibridge.push(str(copy), f"{repo}:v2")
    sent = _sent_digests(fault_proxy)
    assert sent and not sent & held, "only blobs the repository lacks are sent"
    assert _blob_bytes_sent(fault_proxy) == result.stats.bytes_copied < 5_000
    _adds_up(result, f"{repo}:v2")


def test_changed_copy_sends_only_the_new_blobs_and_counts_each_once(tmp_path, fault_proxy, first_push):
    model, repo = first_push
    copy = tmp_path / "model-copy"
    shutil.copytree(model, copy)
    extra = b"a new file only this version has\n" * 1000
    (copy / "extra.bin").write_bytes(extra)
    result = ocibridge.push(str(copy), f"{repo}:v3")
    sent = _blob_bytes_sent(fault_proxy)
    assert sent == result.stats.bytes_copied
    assert len(extra) <= sent < len(extra) + 10_000  # the new file and the small config, nothing else
    assert result.stats.blobs_skipped >= 2
    _adds_up(result, f"{repo}:v3")


def test_summary_counts_each_blob_once_when_the_manifest_is_there(tmp_path, fault_proxy, first_push):
    """A push into a layout ingests new files unasked (a local write); under a new tag whose
    manifest the layout holds already, a blob it ingested is counted as copied, not again as
    present ("1 blobs uploaded, 3 already present" for a 3-blob artifact)."""
    model, _ = first_push
    layout = tmp_path / "layout"
    ocibridge.push(str(model), f"oci:{layout}:a")
    copy = tmp_path / "copy"
    shutil.copytree(model, copy)
    result = ocibridge.push(str(copy), f"oci:{layout}:b")
    _adds_up(result, f"oci:{layout}:b")


def test_cli_summary_adds_up(tmp_path, fault_proxy, first_push):
    model, repo = first_push
    copy = tmp_path / "elsewhere" / "model"
    shutil.copytree(model, copy)
    run = subprocess.run(
        [os.fspath(Path(os.sys.executable)), "-m", "ocibridge", "push", str(copy), f"{repo}:v4"],
        capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, check=True)
    assert _blob_bytes_sent(fault_proxy) == 0
    assert "already there: nothing to send" in run.stdout or "0 blobs uploaded" in run.stdout, run.stdout
