"""Trusting a file by its name in a shared cache (issue 41, class 3).

Whoever can write a shared Hub cache or model cache may leave any file (or a link) under the name
ocibridge is about to use. Neither cache trusts a name: the Hub cache's blob is replaced unless
it is the very file just hashed for its etag; the model cache hashes a blob it finds before it
links or reads it (and fetches it again when it is not what its name says). Each case compares
what a Hub library (or ``path``) is served with the model's real files, and a snapshot of the
directory outside the caches before and after."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import huggingface_hub
import pytest

from ocibridge.cache.modelcache import ModelCache, remove_tree
from ocibridge.cli import main
from tests.hostile_run import snapshot
from tests.hub.test_hf_cache import files_of
from tests.modelgen import make_bert_model
from tests.support.hubcache import offline_hub_cache


@pytest.fixture
def caches(tmp_path, monkeypatch):
    hub = offline_hub_cache(tmp_path, monkeypatch)
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path))  # the cache root: the model cache is its models/
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("a file of the user's, outside every cache")
    return hub, tmp_path / "models", outside


def _plant(path: Path, how: str, outside: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        os.chmod(path.parent, 0o755)
        path.unlink()
    if how == "other-bytes":
        path.write_bytes(b"\xee" * size)  # same size, other content
    elif how == "link-out":
        path.symlink_to(outside / "secret.txt")
    elif how == "short":
        path.write_bytes(b"tiny")
    else:
        raise AssertionError(how)


PLANTS = ["other-bytes", "link-out", "short"]


@pytest.mark.parametrize("how", PLANTS)
@pytest.mark.parametrize("which", ["model.safetensors", "config.json"])
@pytest.mark.parametrize("command", ["pull", "path"])
def test_a_file_planted_in_the_hub_cache_is_never_served(tmp_path, capsys, caches, registry, unique_repo,
                                                         how, which, command):
    hub, _, outside = caches
    src = make_bert_model(tmp_path / "src")
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(src), ref, "-q"]) == 0
    data = (src / which).read_bytes()
    etag = hashlib.sha256(data).hexdigest()  # every file, as serve names it
    _plant(hub / "models--acme--tiny" / "blobs" / etag, how, outside, len(data))
    before = snapshot(outside)
    argv = ["pull", ref, "hf:acme/tiny", "-q"] if command == "pull" else ["path", ref, "--hf", "acme/tiny"]
    assert main(argv) == 0
    capsys.readouterr()
    where = Path(huggingface_hub.snapshot_download("acme/tiny", local_files_only=True))
    assert files_of(where) == files_of(src)  # what transformers would load: the model's bytes
    blob = hub / "models--acme--tiny" / "blobs" / etag
    assert not blob.is_symlink() and blob.read_bytes() == data
    assert snapshot(outside) == before


@pytest.mark.parametrize("how", PLANTS)
def test_a_file_planted_in_the_model_cache_is_hashed_before_it_is_linked(tmp_path, capsys, caches, registry,
                                                                        unique_repo, how):
    _, models, outside = caches
    src = make_bert_model(tmp_path / "src")
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(src), ref, "-q"]) == 0
    weights = (src / "model.safetensors").read_bytes()
    digest = "sha256:" + hashlib.sha256(weights).hexdigest()
    blob = ModelCache().blobs.blob_path(digest)
    _plant(blob, how, outside, len(weights))  # before the first build: a co-user got there first
    before = snapshot(outside)
    capsys.readouterr()
    code = main(["path", ref])
    out, err = capsys.readouterr()
    assert code == 0, err
    snap = Path(out.strip())
    assert files_of(snap) == files_of(src)
    assert not blob.is_symlink() and blob.read_bytes() == weights  # fetched again, verified
    assert snapshot(outside) == before


@pytest.mark.parametrize("how", PLANTS)
def test_offline_a_planted_blob_is_one_line_not_served(tmp_path, capsys, caches, registry, unique_repo, how):
    _, models, outside = caches
    src = make_bert_model(tmp_path / "src")
    ref = f"{registry.host}/{unique_repo}:v1"
    assert main(["push", str(src), ref, "-q"]) == 0
    assert main(["path", ref]) == 0  # every blob, the manifest and the record are cached
    capsys.readouterr()
    for built in (models / "snapshots").iterdir():  # the snapshot is gone: the next path builds again
        remove_tree(built)
    weights = (src / "model.safetensors").read_bytes()
    digest = "sha256:" + hashlib.sha256(weights).hexdigest()
    _plant(ModelCache().blobs.blob_path(digest), how, outside, len(weights))
    before = snapshot(outside)
    code = main(["path", ref, "--offline"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and err.startswith("ocibridge: error: "), err
    assert f"blob {digest} is not in the model cache" in err, err
    assert snapshot(outside) == before
    assert not [p for p in (models / "snapshots").iterdir() if not p.name.startswith(".")
                and (p / "model.safetensors").exists()]
