"""Chunk tables by default (issue 43): a push binds a table of its raw files from 64 MiB, made in
the read that hashes each file, so a lazy read of one tensor moves under 1 % of the blob;
``--no-chunks`` binds none; a model with no such file keeps the digest it had before."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file
from support.fixtures import new_repo
from support.hubcache import offline_hub_cache

import ocibridge
from ocibridge.api.lazy_ops import open_model, open_tensors
from ocibridge.api.model_ops import push
from ocibridge.chunks import chunking
from ocibridge.chunks.chunking import ChunkHasher, ChunkingReader, ChunkPolicy
from ocibridge.chunks.chunktable import (
    ANNOTATION_DIGEST,
    ARTIFACT_TYPE,
    DEFAULT_CHUNK_SIZE,
    PUSH_THRESHOLD,
    chunk_stream,
)
from ocibridge.cli import main
from ocibridge.oci.models import Descriptor
from ocibridge.stores.registry import open_repository

MiB = 1024 * 1024


def _safetensors(path: Path, big_bytes: int) -> None:
    """A safetensors file (written by the safetensors library) of a large tensor and a small one."""
    rng = np.random.default_rng(43)
    save_file({"a.big": rng.random(big_bytes // 4, dtype=np.float32),
               "b.small": rng.random(1024, dtype=np.float32)}, str(path))


@pytest.fixture(scope="module")
def big_src(tmp_path_factory) -> Path:
    """A model directory of one 256 MiB safetensors file (a small tensor's 2 chunks: 0.8 %)."""
    src = tmp_path_factory.mktemp("big") / "model"
    src.mkdir()
    _safetensors(src / "model.safetensors", 256 * MiB)
    (src / "config.json").write_text('{"architectures": ["Test"]}')
    return src


@pytest.fixture(scope="module")
def over_src(tmp_path_factory) -> Path:
    """A model directory of one safetensors file just over the push threshold: a table is bound, for
    the tests where how small a share of the blob a read moves is not the point."""
    src = tmp_path_factory.mktemp("over") / "model"
    src.mkdir()
    _safetensors(src / "model.safetensors", PUSH_THRESHOLD + MiB)
    (src / "config.json").write_text('{"architectures": ["Test"]}')
    return src


def _manifest(registry, repo: str, tag: str = "v1"):
    store = open_repository(host=registry.host, repository=repo)
    desc = store.resolve(tag)
    from ocibridge.oci.models import parse_manifest_bytes

    return store, desc, parse_manifest_bytes(store.fetch_bytes(desc))


def _blob_bytes(proxy) -> int:
    return sum(r.response_bytes for r in proxy.requests_matching("GET", "/blobs/"))


def test_a_default_push_binds_a_table_and_one_tensor_moves_under_one_percent(registry, fault_proxy, big_src,
                                                                              capsys):
    repo = new_repo()
    assert main(["push", str(big_src), f"{registry.host}/{repo}:v1", "-q", "--json"]) == 0
    pushed = json.loads(capsys.readouterr().out)
    assert pushed["chunks"]["layers"] == 1  # the weights; config.json is under the threshold
    store, desc, manifest = _manifest(registry, repo)
    assert manifest.annotations is not None and manifest.annotations[ANNOTATION_DIGEST] == pushed["chunks"]["table"]
    subject = Descriptor(mediaType=desc.mediaType, digest=desc.digest, size=desc.size)
    assert [r.digest for r in store.referrers(subject, ARTIFACT_TYPE)] == [pushed["chunks"]["referrer"]]
    layer = next(x for x in manifest.layers if x.size > PUSH_THRESHOLD)

    fault_proxy.clear()
    tensors = open_tensors(f"{fault_proxy.host}/{repo}:v1", "model.safetensors", warn=None, cache=False)
    try:
        got = tensors.get_tensor("b.small")
    finally:
        tensors.blob.close()
    with safe_open(str(big_src / "model.safetensors"), framework="numpy") as real:
        assert got.tobytes() == real.get_tensor("b.small").tobytes()
    moved = _blob_bytes(fault_proxy)
    assert 0 < moved <= layer.size // 100, moved


def test_no_chunks_binds_none_and_a_read_moves_the_whole_blob(registry, fault_proxy, over_src, capsysbinary):
    repo = new_repo()
    assert main(["push", str(over_src), f"{registry.host}/{repo}:v1", "--no-chunks", "-q", "--json"]) == 0
    assert "chunks" not in json.loads(capsysbinary.readouterr().out)
    store, desc, manifest = _manifest(registry, repo)
    assert ANNOTATION_DIGEST not in (manifest.annotations or {})
    assert store.referrers(Descriptor(mediaType=desc.mediaType, digest=desc.digest, size=desc.size),
                           ARTIFACT_TYPE) == []
    layer = next(x for x in manifest.layers if x.size > PUSH_THRESHOLD)
    fault_proxy.clear()
    assert main(["cat", f"{fault_proxy.host}/{repo}:v1", "model.safetensors", "--range", "0-8"]) == 0
    with (over_src / "model.safetensors").open("rb") as f:
        assert capsysbinary.readouterr().out == f.read(8)
    assert _blob_bytes(fault_proxy) >= layer.size  # without a table the whole blob is fetched to verify it


def test_a_default_push_is_reproducible_and_made_in_the_hashing_read(registry, over_src, monkeypatch):
    def no_second_read(*a, **kw):  # the fallback read of a file whose chunks the hashing read missed
        raise AssertionError("a file was read a second time for its chunk table")

    monkeypatch.setenv("OCIBRIDGE_DIGEST_CACHE", "0")  # digests unknown: each push hashes its files
    monkeypatch.setattr(chunking, "chunk_stream", no_second_read)
    a = push(str(over_src), f"{registry.host}/{new_repo()}:v1")
    b = push(str(over_src), f"{registry.host}/{new_repo()}:v1")
    assert a.descriptor.digest == b.descriptor.digest
    assert a.extra["chunks"]["table"] == b.extra["chunks"]["table"] and a.extra["chunks"]["layers"] == 1
    plain = push(str(over_src), f"{registry.host}/{new_repo()}:v1", options=ocibridge.PushOptions(chunks=False))
    assert plain.descriptor.digest != a.descriptor.digest and "chunks" not in plain.extra


def test_a_re_push_takes_the_table_from_the_cache_else_one_read(registry, over_src, tmp_path, monkeypatch):
    """A re-push (the digest cache names the file, so nothing reads it) takes the chunks from the
    chunk cache; without that entry, the copy's one read of the file makes the same table (the
    file is pending as if its digest were unknown), never a read of its own before the copy."""
    import shutil

    from ocibridge.model import builder

    cache = tmp_path / "cache"
    monkeypatch.setenv("OCIBRIDGE_CACHE", str(cache))
    reads: list[int] = []
    real = chunking.chunk_stream

    def counted(reader, chunk_size):
        reads.append(chunk_size)
        return real(reader, chunk_size)

    opened: list[int] = []

    class CountedReader(ChunkingReader):
        def __init__(self, *args, **kwargs):
            opened.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(chunking, "chunk_stream", counted)
    monkeypatch.setattr(builder, "ChunkingReader", CountedReader)
    first = push(str(over_src), f"oci:{tmp_path / 'a'}:v1")  # into a layout: hashed as it is written
    assert len(opened) == 1
    again = push(str(over_src), f"{registry.host}/{new_repo()}:v1")
    assert reads == [] and len(opened) == 1  # the table both times without a read of its own
    shutil.rmtree(cache / "chunk-tables")
    third = push(str(over_src), f"{registry.host}/{new_repo()}:v1")
    assert reads == [] and len(opened) == 2  # the copy's read of the file made its chunks
    assert first.descriptor.digest == again.descriptor.digest == third.descriptor.digest
    assert first.extra["chunks"]["table"] == again.extra["chunks"]["table"] == third.extra["chunks"]["table"]


def test_a_model_under_the_threshold_keeps_its_digest(registry, tmp_path):
    src = tmp_path / "m"
    src.mkdir()
    _safetensors(src / "model.safetensors", PUSH_THRESHOLD - MiB)
    default = push(str(src), f"{registry.host}/{new_repo()}:v1")
    plain = push(str(src), f"{registry.host}/{new_repo()}:v1", options=ocibridge.PushOptions(chunks=False))
    assert default.descriptor.digest == plain.descriptor.digest and "chunks" not in default.extra
    # push from Python draws the same line: it bound this file at 16 MiB
    asked = ocibridge.push(str(src), f"{registry.host}/{new_repo()}:v1")
    assert asked.descriptor.digest == plain.descriptor.digest and "chunks" not in asked.extra


def test_chunk_threshold_flag_and_bad_values(registry, tmp_path, capsys):
    src = tmp_path / "m"
    src.mkdir()
    (src / "w.bin").write_bytes(b"\x07" * (3 * MiB + 5))
    repo = new_repo()
    assert main(["push", str(src), f"{registry.host}/{repo}:v1", "--chunk-threshold", "2M", "-q", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["chunks"]["layers"] == 1
    with open_model(f"{registry.host}/{repo}:v1", warn=None, cache=False) as model:
        assert model.read("w.bin", 3 * MiB, 3 * MiB + 5) == b"\x07" * 5
    assert main(["push", str(src), f"{registry.host}/{repo}:v2", "--chunk-threshold", "lots", "-q"]) == 2
    err = capsys.readouterr().err
    assert "--chunk-threshold" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    # with --no-chunks it contradicts: one line, not silently dropped
    assert main(["push", str(src), f"{registry.host}/{repo}:v2", "--no-chunks", "--chunk-threshold", "1M"]) == 2
    err = capsys.readouterr().err
    assert "leave it out with --no-chunks" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("threaded", [False, True])
def test_chunking_reader_matches_a_plain_chunking_read(threaded):
    data = np.random.default_rng(1).bytes(5 * DEFAULT_CHUNK_SIZE // 2 + 17)
    reader = ChunkingReader(io.BytesIO(data), ChunkPolicy(threaded=threaded))
    with reader:
        while reader.read(300_001):  # reads that straddle chunk edges
            pass
    assert reader.chunks(len(data)) == chunk_stream(io.BytesIO(data)).chunks
    seeking = ChunkingReader(io.BytesIO(data), ChunkPolicy(threaded=threaded))
    seeking.read(10)
    seeking.seek(0)
    seeking.read()
    seeking.close()
    assert seeking.chunks(len(data)) is None  # bytes read twice: not the file's chunks
    hasher = ChunkHasher(DEFAULT_CHUNK_SIZE, threaded=threaded)
    assert hasher.finish() == ()


def test_a_bad_chunk_size_is_one_clear_error(tmp_path):
    from ocibridge.errors import UsageError

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "w.bin").write_bytes(b"x")
    with pytest.raises(UsageError, match="chunk size 100 is not between"):
        push(str(tmp_path / "m"), f"oci:{tmp_path / 'o'}:v1", options=ocibridge.PushOptions(chunk_size=100))
    assert not (tmp_path / "o").exists()  # refused before anything is written


def test_push_to_docker_model_binds_and_carries_the_table(registry, fault_proxy, big_src, capsys):
    repo = new_repo()
    assert main(["push", str(big_src), f"{registry.host}/{repo}:v1", "--to", "docker-model", "-q", "--json"]) == 0
    pushed = json.loads(capsys.readouterr().out)
    assert pushed["family"] == "docker-model" and pushed["chunks"]["layers"] == 1
    store, desc, manifest = _manifest(registry, repo)
    assert (manifest.annotations or {}).get(ANNOTATION_DIGEST) == pushed["chunks"]["table"]
    subject = Descriptor(mediaType=desc.mediaType, digest=desc.digest, size=desc.size)
    assert [r.digest for r in store.referrers(subject, ARTIFACT_TYPE)] == [pushed["chunks"]["referrer"]]
    layer = max(manifest.layers, key=lambda x: x.size)
    fault_proxy.clear()
    with open_model(f"{fault_proxy.host}/{repo}:v1", warn=None, cache=False) as model, \
            (big_src / "model.safetensors").open("rb") as f:
        f.seek(100 * MiB)
        assert model.read("model.safetensors", 100 * MiB, 100 * MiB + 10) == f.read(10)
    assert 0 < _blob_bytes(fault_proxy) <= layer.size // 100


def test_push_of_a_hugging_face_cache_model_binds_the_same_table(registry, tmp_path, monkeypatch, capsys):
    """``push hf:ORG/NAME`` reads the snapshot's files as a directory push does: same table."""
    offline_hub_cache(tmp_path, monkeypatch)
    src = tmp_path / "m"
    src.mkdir()
    _safetensors(src / "model.safetensors", PUSH_THRESHOLD + MiB)
    (src / "config.json").write_text('{"model_type": "bert"}')
    first = push(str(src), f"{registry.host}/{new_repo()}:v1")
    assert main(["pull", first.reference, "hf:acme/big", "-q"]) == 0
    again = push("hf:acme/big", f"{registry.host}/{new_repo()}:v1")
    assert again.extra["chunks"]["table"] == first.extra["chunks"]["table"]
    assert again.extra["chunks"]["layers"] == 1
    capsys.readouterr()


def test_a_file_under_the_push_threshold_is_read_whole_without_a_notice(registry, tmp_path):
    """A default push tables files from 64 MiB; a 20 MiB file beside one is read whole by
    design. The reader said 'the chunk table has no entry for ...; reading the whole blob' for
    it on every open, as if something were missing; it says so only for a layer from 64 MiB."""
    src = tmp_path / "m"
    src.mkdir()
    _safetensors(src / "model.safetensors", PUSH_THRESHOLD + MiB)
    small = np.random.default_rng(7).bytes(20 * MiB)
    (src / "small.bin").write_bytes(small)
    ref = f"{registry.host}/{new_repo()}:v1"
    assert "chunks" in push(str(src), ref).extra
    warnings: list[str] = []
    with open_model(ref, warn=warnings.append, cache=False) as model:
        assert model.read("small.bin", 5 * MiB, 5 * MiB + 7) == small[5 * MiB:5 * MiB + 7]
    assert warnings == []


def test_a_carton_pushed_into_a_layout_is_read_once_for_digest_and_chunks(tmp_path, monkeypatch):
    """A carton names its files' SHA-256 (MANIFEST), so its large file is no pending blob by its
    digest; its table is still made by the copy's one read of the entry, not by a read of its own
    before the copy (that read made carton → layout 6.5x its floor at 1 GiB). Pushed again, the
    same digest."""
    from tests.kinds.test_carton import make_carton, noise

    monkeypatch.setenv("OCIBRIDGE_CACHE", str(tmp_path / "cache"))
    reads: list[int] = []
    real = chunking.chunk_stream
    monkeypatch.setattr(chunking, "chunk_stream", lambda reader, size: (reads.append(size), real(reader, size))[1])
    weights = noise(3 * MiB + 17)
    carton = tmp_path / "m.carton"
    make_carton(carton, {"model/weights.bin": weights, "model/config.json": b"{}"})
    pushed = push(str(carton), f"oci:{tmp_path / 'layout'}:v1", options=ocibridge.PushOptions(chunk_threshold=MiB))
    assert reads == []  # no read of its own
    assert pushed.extra["chunks"]["layers"] == 1
    again = push(str(carton), f"oci:{tmp_path / 'again'}:v1", options=ocibridge.PushOptions(chunk_threshold=MiB))
    assert again.descriptor.digest == pushed.descriptor.digest and reads == []
