"""Only changed chunks travel up (issue 55): a fine-tune that changes one tensor of ten is
uploaded by hf_xet (each upload from its own fresh machine: its own HF_HOME, no local shard
cache) through ``ocibridge serve`` (a process) to a real registry; serve answers Xet's global
dedupe from the repository's earlier upload, so only the changed chunks come, and the file serve
rebuilds from old and new chunks is checked before the registry sees it. And a file another
repository of the registry holds is not asked of an LFS client at all: the commit mounts it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import huggingface_hub
import numpy as np
import pytest
from serving import files_of, point_hub_at, published_files_of
from support.publishing import model_dir, opened_store, serve_process
from test_serve_publish import ROOT
from test_serve_xet_upload import call as xet_upload_call

from tests.kinds.test_families_mirror import _uploads_and_mounts

pytest.importorskip("hf_xet")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

MIB = 1024 * 1024
TENSORS = 10
UPLOAD = """
import sys
from huggingface_hub import HfApi
api = HfApi(endpoint=sys.argv[1], token="writer-token")
api.create_repo(sys.argv[2], exist_ok=True)
print(api.upload_file(path_or_fileobj=sys.argv[3], path_in_repo="model.safetensors", repo_id=sys.argv[2]).oid)
"""


def weights(path: Path, seed: int, changed: int | None = None) -> bytes:
    """Ten float32 tensors of 1.6 MiB (random: nothing repeats), tensor ``changed`` drawn anew."""
    rng = np.random.default_rng(seed)
    tensors = {f"layer{i}.weight": rng.standard_normal(420_000, dtype=np.float32) for i in range(TENSORS)}
    if changed is not None:
        tensors[f"layer{changed}.weight"] = np.random.default_rng(seed + 1).standard_normal(420_000,
                                                                                            dtype=np.float32)
    safetensors_numpy.save_file(tensors, str(path))
    return path.read_bytes()


def upload(url: str, repo: str, path: Path, home: Path) -> str:
    """``upload_file`` as a fresh machine runs it (hf_xet on; its own caches); the commit oid."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HOME": str(home), "HF_ENDPOINT": url,
           "HF_HUB_DISABLE_TELEMETRY": "1"}
    env.pop("HF_HUB_DISABLE_XET", None)
    env.pop("HF_XET_CACHE", None)
    done = subprocess.run([sys.executable, "-c", UPLOAD, url, repo, str(path)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[-1]


def received(log: str) -> int:
    """The bytes of xorbs serve says it received (its log line per xorb POST)."""
    taken = sum(int(n) for n in re.findall(r"xorb received, (\d+) bytes", log))
    offered = sum(int(n) for n in re.findall(r"xorb held already, (\d+) bytes offered", log))
    return taken + offered


def layer_digests(ref: str) -> list[str]:
    from ocibridge.model.extract import fetch_manifest

    with opened_store(ref) as (store, tag):
        _, manifest = fetch_manifest(store, store.resolve(tag).digest)
        return [x.digest for x in manifest.layers]


def call(url: str, method: str = "GET", body: bytes | None = None, token: str = "writer-token") -> tuple[int, bytes]:
    """test_serve_xet_upload's request, as this file's writer by default."""
    return xet_upload_call(url, method, body, token)


@pytest.mark.parametrize("cleaned", [False, True], ids=["xorbs-kept", "staging-cleaned"])
def test_a_one_tensor_change_sends_only_its_chunks(tmp_path, registry, unique_repo, monkeypatch, cleaned):
    """``cleaned``: serve's staging (kept xorbs and staged files) is emptied between the two
    uploads, as a cleanup after the commit would: the old chunks then come from the registry's
    blob of the committed file, each checked against the hash its xorb had."""
    old = weights(tmp_path / "old.safetensors", seed=7)
    new = weights(tmp_path / "new.safetensors", seed=7, changed=4)
    assert len(new) == len(old) and new != old
    prefix = f"{registry.host}/{unique_repo}"
    log = tmp_path / "serve.log"
    with serve_process(tmp_path, prefix) as url:
        upload(url, "acme/ft", tmp_path / "old.safetensors", tmp_path / "machine-a")
        first = received(log.read_text())
        assert first >= len(old) * 0.9  # the first upload sent (about) the whole file
        if cleaned:
            from ocibridge.core.environment import cache_root

            shutil.rmtree(cache_root() / "serve" / "staging")
        mark = len(log.read_text())
        oid = upload(url, "acme/ft", tmp_path / "new.safetensors", tmp_path / "machine-b")
        said = log.read_text()[mark:]
        second = received(said)
        assert "dedupe answered" in said
        assert second <= 0.2 * len(new), f"{second} of {len(new)} bytes sent again"
        assert second > 0  # the changed tensor did come

        new_sha = hashlib.sha256(new).hexdigest()
        ref = f"{prefix}/acme/ft:latest"
        assert f"sha256:{new_sha}" in layer_digests(ref)
        point_hub_at(monkeypatch, url, tmp_path / "hub", xet=True)
        got = huggingface_hub.hf_hub_download("acme/ft", "model.safetensors", token="reader-token")
        assert Path(got).read_bytes() == new
        assert huggingface_hub.HfApi(endpoint=url, token="reader-token").model_info("acme/ft").sha == oid

        if cleaned:
            return
        # a shard re-using an old xorb to claim bytes it does not hold is refused, nothing changes
        cas, token = _grant(url)
        kept = _an_old_xorb(tmp_path)
        before = layer_digests(ref)
        for shard in _tampered_shards(kept):
            status, body = call(f"{cas}/v1/shards", "POST", shard, token)
            assert status == 400, body
        assert layer_digests(ref) == before


def _grant(url: str) -> tuple[str, str]:
    status, body = call(f"{url}/api/models/acme/ft/xet-write-token/main")
    assert status == 200, body
    answer = json.loads(body)
    return answer["casUrl"], answer["accessToken"]


def _an_old_xorb(tmp_path: Path) -> tuple[bytes, list[tuple[bytes, int]]]:
    """A xorb serve kept from the first upload, and its chunks (from its own bytes)."""
    from ocibridge.core.environment import cache_root
    from ocibridge.hubserver.xet import merkle as xethash
    from ocibridge.hubserver.xet import shards as xetformat

    xorbs = cache_root() / "serve" / "staging" / "xorbs"
    path = next(p for p in sorted(xorbs.iterdir()))
    with open(path, "rb") as f:
        chunks = xetformat.chunk_list(f, path.stat().st_size)
    name = xethash.from_hex(path.name)
    assert name is not None
    return name, chunks


def _tampered_shards(kept: tuple[bytes, list[tuple[bytes, int]]]) -> list[bytes]:
    """Shards naming the first chunk of a kept xorb: with a Xet hash that is not that chunk's,
    and with the chunk's true Xet hash but a SHA-256 of other bytes."""
    import struct

    from ocibridge.hubserver.xet import merkle as xethash
    from ocibridge.hubserver.xet import shards as xetformat

    xorb, chunks = kept
    chunk, size = chunks[0]
    true_hash = xethash.file_hash([(chunk, size)])

    def shard(file_hash: bytes, sha256: bytes) -> bytes:
        return (xetformat.SHARD_TAG + struct.pack("<QQ", 2, 0)
                + file_hash + struct.pack("<IIQ", xetformat.WITH_METADATA_EXT, 1, 0)
                + xorb + struct.pack("<IIII", 0, size, 0, 1)
                + sha256 + bytes(16)
                + xetformat.BOOKEND + bytes(16))

    other = hashlib.sha256(b"not these bytes").digest()
    wrong_hash = xethash.file_hash([(xethash.chunk_hash(b"other"), size)])
    return [shard(wrong_hash, other), shard(true_hash, other)]


def test_a_file_another_repository_holds_is_mounted_not_uploaded(tmp_path, registry, unique_repo, monkeypatch):
    """A model pushed to one repository (``ocibridge push``: serve never saw its bytes), then the
    same folder uploaded through serve into a second one (LFS, as HF_HUB_DISABLE_XET=1 runs): the
    batch API answers every oid "already have it", the client sends nothing, and the registry's
    own log shows the weights mounted into the second repository, never PUT there."""
    from huggingface_hub import HfApi, _commit_api

    from ocibridge.cli import main

    src = model_dir(tmp_path / "model")
    prefix = f"{registry.host}/{unique_repo}"
    assert main(["push", str(src), f"{prefix}/acme/one:latest", "-q"]) == 0
    with serve_process(tmp_path, prefix) as url:
        point_hub_at(monkeypatch, url, tmp_path / "hub")
        sent: list[str] = []
        real = _commit_api.lfs_upload

        def counted(operation: object, **kwargs: object) -> None:
            sent.append(operation.path_in_repo)  # type: ignore[attr-defined]
            real(operation=operation, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(_commit_api, "lfs_upload", counted)
        api = HfApi(endpoint=url, token="writer-token")
        api.create_repo("acme/two")
        api.upload_folder(repo_id="acme/two", folder_path=src)
        assert sent == []
        got = huggingface_hub.snapshot_download("acme/two", token="reader-token")
        assert published_files_of(Path(got)) == files_of(src)
    weights = "sha256:" + hashlib.sha256((src / "model.safetensors").read_bytes()).hexdigest()
    uploaded, mounted = _uploads_and_mounts(registry.log_file.read_text(), f"{unique_repo}/acme/two")
    assert weights in mounted and weights not in uploaded, (uploaded, mounted)


def test_chunks_of_a_dropped_xorb_are_read_back_checked(tmp_path):
    """A xorb no longer kept is rebuilt from where its chunks lie in a staged file, each chunk
    checked against the hash the xorb had: a wrong place is refused, never written."""
    import struct

    from ocibridge.hubserver.access import Signer as Grants
    from ocibridge.hubserver.uploads.staging import Staging
    from ocibridge.hubserver.xet import merkle as xethash
    from ocibridge.hubserver.xet import shards as xetformat
    from ocibridge.hubserver.xet.dedupe import Dedupe
    from ocibridge.hubserver.xet.upload import XetUpload

    staging = Staging(tmp_path / "staging")
    up = XetUpload(staging, Grants([]), lambda request: "", dedupe=Dedupe(tmp_path / "staging" / "xorbs",
                                                                          tmp_path / "dedupe"))
    pieces = [os.urandom(3000), os.urandom(5000)]
    chunks = [(xethash.chunk_hash(p), len(p)) for p in pieces]
    xorb = xethash.xorb_hash(chunks)
    up.xorbs.mkdir(parents=True)
    (up.xorbs / xethash.hex_of(xorb)).write_bytes(b"".join(
        b"\x00" + len(p).to_bytes(3, "little") + b"\x00" + len(p).to_bytes(3, "little") + p for p in pieces))
    up.dedupe.remember_xorb(xorb, chunks)
    up.owners.own(xorb, "acme/x")  # a writer of acme/x sent it (issue 62: another repository may not name it)
    whole = b"".join(pieces)
    sha = xethash.from_hex(hashlib.sha256(whole).hexdigest())
    assert sha is not None
    shard = tmp_path / "shard"
    shard.write_bytes(xetformat.SHARD_TAG + struct.pack("<QQ", 2, 0)
                      + xethash.file_hash(chunks) + struct.pack("<IIQ", xetformat.WITH_METADATA_EXT, 1, 0)
                      + xorb + struct.pack("<IIII", 0, len(whole), 0, 2)
                      + sha + bytes(16) + xetformat.BOOKEND + bytes(16))
    assert up._stage_shard(shard, "acme/x") is None
    (up.xorbs / xethash.hex_of(xorb)).unlink()  # dropped: the staged file holds its chunks
    assert up._stage_shard(shard, "acme/x") is None
    assert up._stage_shard(shard, "acme/other") == f"file {xethash.hex_of(xethash.file_hash(chunks))}: " \
        f"xorb {xethash.hex_of(xorb)} was never uploaded"  # another repository's places: none
    up.dedupe.close()  # the records of the shards answered are written (on dedupe's thread)
    places = next((tmp_path / "dedupe" / "repos").glob("*/places/*"))
    raw = bytearray(places.read_bytes())
    raw[32:40] = (1).to_bytes(8, "little")  # chunk 0 placed one byte late
    places.write_bytes(bytes(raw))
    problem = up._stage_shard(shard, "acme/x")
    assert problem is not None and "is not the chunk it held" in problem
