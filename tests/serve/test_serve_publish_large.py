"""Issue 55's size: ``upload_folder`` of a model directory with a 256 MiB safetensors file, as
huggingface_hub runs by default (hf_xet), through ``ocibridge serve`` (a process) to a real
registry. The bytes come back exactly through the same serve and through ``ocibridge pull``,
``validate --strict`` accepts the commit, and a second ``upload_folder`` of the same directory
sends no large file again (serve's log: no xorb received). With the digest cache off (no side
channel), a commit on top of it (the large file kept: the parent's blob, with the chunk table
the parent binds) is the artifact ``push`` makes of the same files, chunk table included."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import HfApi
from support.publishing import opened_store, serve_process
from test_serve_publish import _layers_and_config, pushed_as_serve_commits, xet_only

from ocibridge.cli import main
from ocibridge.hubserver.repo.initial import GITATTRIBUTES

pytest.importorskip("hf_xet")

MIB = 1024 * 1024
WEIGHTS = 256 * MIB


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(4 * MIB):
            digest.update(block)
    return digest.hexdigest()


def hashes_of(root: Path) -> dict[str, str]:
    """Each file under ``root`` (the client's own cache folder left out) by its SHA-256."""
    return {str(p.relative_to(root)): sha256_of(p) for p in sorted(root.rglob("*"))
            if p.is_file() and ".cache" not in p.relative_to(root).parts}


def large_model(root: Path) -> Path:
    """config.json and a safetensors file of 256 MiB of random bytes (one F32 tensor), written a
    piece at a time."""
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 64}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [WEIGHTS // 4], "data_offsets": [0, WEIGHTS]}}).encode()
    header += b" " * (-len(header) % 8)
    with (root / "model.safetensors").open("wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        for _ in range(WEIGHTS // (16 * MIB)):
            f.write(os.urandom(16 * MIB))
    return root


def xorb_bytes(log: str) -> int:
    return sum(int(n) for n in re.findall(r"xorb received, (\d+) bytes", log))


def test_a_256_mib_model_published_over_xet_comes_back_exactly(tmp_path, registry, unique_repo, monkeypatch,
                                                               capsys):
    monkeypatch.setenv("OCIBRIDGE_DIGEST_CACHE", "0")  # serve and push below: what a commit knows, it was told
    src = large_model(tmp_path / "model")
    expected = hashes_of(src) | {".gitattributes": hashlib.sha256(GITATTRIBUTES).hexdigest()}  # the first commit's
    prefix = f"{registry.host}/{unique_repo}"
    log = tmp_path / "serve.log"
    with serve_process(tmp_path, prefix) as url:
        xet_only(monkeypatch, url, tmp_path / "hub")
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo("acme/large")
        first = api.upload_folder(repo_id="acme/large", folder_path=src, commit_message="256 MiB")
        assert xorb_bytes(log.read_text()) >= WEIGHTS * 0.9  # it did travel over Xet, once
        assert api.model_info("acme/large").sha == first.oid
        got = huggingface_hub.snapshot_download("acme/large", token="reader-token")
        assert hashes_of(Path(got)) == expected

        mark = len(log.read_text())
        again = api.upload_folder(repo_id="acme/large", folder_path=src, commit_message="the same again")
        assert xorb_bytes(log.read_text()[mark:]) == 0  # the branch holds it: nothing large sent again
        assert api.model_info("acme/large").sha in (first.oid, again.oid)
        card = api.upload_file(path_or_fileobj=b"# large\n", path_in_repo="README.md", repo_id="acme/large")
        assert api.model_info("acme/large").sha == card.oid
        expected["README.md"] = hashlib.sha256(b"# large\n").hexdigest()

    ref = f"{prefix}/acme/large:latest"
    assert main(["pull", ref, str(tmp_path / "large"), "-q"]) == 0
    assert hashes_of(tmp_path / "large") == expected
    assert main(["validate", ref, "--strict"]) == 0
    capsys.readouterr()
    assert main(["push", str(tmp_path / "large"), f"{prefix}/same:latest", "-q"]) == 0
    assert pushed_as_serve_commits(ref) == _layers_and_config(f"{prefix}/same:latest")
    assert _table_of(ref) == _table_of(f"{prefix}/same:latest") is not None


def _table_of(ref: str) -> str | None:
    """The chunk table the manifest binds (its digest)."""
    from ocibridge.chunks.chunktable import ANNOTATION_DIGEST

    with opened_store(ref) as (store, tag):
        manifest = json.loads(store.fetch_bytes(store.resolve(tag)))
        return manifest.get("annotations", {}).get(ANNOTATION_DIGEST)
