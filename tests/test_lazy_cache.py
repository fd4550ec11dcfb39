"""Verified chunks of lazy reads kept in the model cache (issue 29): a range read a second time
moves no byte of the layer (counted on the registry log), only verified chunks are stored, a
damaged stored chunk is fetched again, and concurrent readers share the cache safely."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest
from support.faultproxy import corrupt
from support.fixtures import new_repo

from ocibridge.api.lazy_ops import open_model, push_with_chunks
from ocibridge.cache.chunks import CacheChunks
from ocibridge.cache.models import ModelCache, model_cache_root
from ocibridge.cache.prune import prune
from ocibridge.errors import DigestMismatch
from ocibridge.remote.table import DEFAULT_CHUNK_SIZE

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def chunked(registry, tmp_path_factory):
    """A 20 MiB file pushed with ``--chunks``: (repo, its bytes)."""
    src = tmp_path_factory.mktemp("cached") / "model"
    src.mkdir()
    data = os.urandom(20 * MiB + 321)
    (src / "weights.bin").write_bytes(data)
    repo = new_repo()
    push_with_chunks(str(src), f"{registry.host}/{repo}:v1")
    return repo, data


def _layer_bytes(proxy, digest: str) -> int:
    return sum(r.response_bytes for r in proxy.requests_matching("GET", f"/blobs/{digest}"))


def _read(ref: str, start: int, end: int, **kw) -> tuple[bytes, str]:
    with open_model(ref, warn=None, **kw) as model:
        return model.read("weights.bin", start, end), model.file("weights.bin").layer.digest


def test_a_second_read_of_a_range_moves_nothing(chunked, fault_proxy):
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    start, end = 2 * MiB + 10, 5 * MiB - 10  # chunks 2, 3 and 4
    got, digest = _read(ref, start, end)
    assert got == data[start:end]
    first = _layer_bytes(fault_proxy, digest)
    assert first == 3 * DEFAULT_CHUNK_SIZE
    stored = CacheChunks(model_cache_root())
    names = {p.name for p in stored.files()}
    assert names == {hashlib.sha256(data[i * MiB:(i + 1) * MiB]).hexdigest() for i in (2, 3, 4)}
    again, _ = _read(ref, start, end)  # a new open: nothing in memory, all from the cache
    assert again == data[start:end]
    assert _layer_bytes(fault_proxy, digest) == first
    # a wider range moves only the chunks the cache lacks
    wider, _ = _read(ref, 1 * MiB, 6 * MiB)  # chunks 1 to 5
    assert wider == data[1 * MiB:6 * MiB]
    assert _layer_bytes(fault_proxy, digest) == first + 2 * DEFAULT_CHUNK_SIZE


def test_without_the_cache_nothing_is_stored_and_every_read_moves(chunked, fault_proxy):
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    for _ in range(2):
        got, digest = _read(ref, 0, 100, cache=False)
        assert got == data[:100]
    assert _layer_bytes(fault_proxy, digest) == 2 * DEFAULT_CHUNK_SIZE
    assert CacheChunks(model_cache_root()).files() == []


def test_a_tampered_chunk_is_never_stored(chunked, fault_proxy):
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
        fault_proxy.add("GET", f"/blobs/{digest}", corrupt(offset=100))
        with pytest.raises(DigestMismatch):
            model.read("weights.bin", 0, 10)
    assert CacheChunks(model_cache_root()).files() == []


def test_a_damaged_stored_chunk_is_fetched_again_and_replaced(chunked, fault_proxy):
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    _, digest = _read(ref, 0, 10)
    stored = CacheChunks(model_cache_root())
    (path,) = stored.files()
    os.chmod(path, 0o644)
    path.write_bytes(b"\0" * MiB)  # the same size, other bytes
    got, _ = _read(ref, 0, 10)
    assert got == data[:10]
    assert _layer_bytes(fault_proxy, digest) == 2 * DEFAULT_CHUNK_SIZE
    assert hashlib.sha256(path.read_bytes()).hexdigest() == path.name


def test_concurrent_readers_share_the_cache(chunked, registry):
    repo, data = chunked
    ref = f"{registry.host}/{repo}:v1"
    results: list[bytes] = []
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            results.append(_read(ref, 0, 8 * MiB)[0])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [data[:8 * MiB]] * 4
    stored = CacheChunks(model_cache_root())
    files = stored.files()
    assert len(files) == 8
    assert all(hashlib.sha256(p.read_bytes()).hexdigest() == p.name for p in files)
    assert not [p for p in stored.dir.iterdir() if p not in files]  # no temporary file left


def test_prune_removes_chunks_first(chunked, registry):
    repo, _ = chunked
    _read(f"{registry.host}/{repo}:v1", 0, 4 * MiB)
    cache = ModelCache(model_cache_root())
    assert len(CacheChunks(cache.root).files()) == 4
    done = prune(cache, max_size=2 * MiB + 512 * 1024)
    assert done.chunks == 2 and len(CacheChunks(cache.root).files()) == 2
    assert prune(cache, older_than=0).chunks == 2
    assert CacheChunks(cache.root).files() == []


def test_chunk_names_must_be_digests(tmp_path: Path):
    with pytest.raises(ValueError, match="not a SHA-256"):
        CacheChunks(tmp_path).path("../x")


def test_small_sequential_reads_through_fsspec_make_long_range_requests(chunked, fault_proxy):
    """A reader of 64 KiB at a time (no fsspec cache in between): the blob reader reads ahead
    in spans, so the whole file is a few Range requests, each byte fetched once."""
    import fsspec

    repo, data = chunked
    fs = fsspec.filesystem("ocibridge", skip_instance_cache=True, cache=False)
    got = bytearray()
    with fs.open(f"{fault_proxy.host}/{repo}:v1/weights.bin", "rb") as f:
        while piece := f.read(64 * 1024):
            got += piece
    for model in list(fs._models.values()):
        model.close()
    assert bytes(got) == data
    layer = [r for r in fault_proxy.requests_matching("GET", "/blobs/") if r.response_bytes > 64 * 1024]
    assert sum(r.response_bytes for r in layer) == len(data)
    assert len(layer) <= 8, [r.response_bytes for r in layer]  # not one request per 1 MiB chunk (21)
