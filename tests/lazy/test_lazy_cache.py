"""Verified chunks of lazy reads kept in the model cache (issue 29): a range read a second time
moves no byte of the layer (counted on the registry log), only verified chunks are stored, a
damaged stored chunk is fetched again, and concurrent readers share the cache safely."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import blake3
import pytest
from support.faultproxy import corrupt
from support.fixtures import new_repo

import ocibridge
from ocibridge.api.lazy_ops import open_model
from ocibridge.cache.chunks import CacheChunks
from ocibridge.cache.modelcache import ModelCache, model_cache_root
from ocibridge.cache.prune import prune
from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE
from ocibridge.core.fsutil import TEMP_PREFIX
from ocibridge.errors import DigestMismatch

MiB = 1024 * 1024


def _pushed(registry, tmp_path_factory, size: int, push) -> tuple[str, bytes]:
    src = tmp_path_factory.mktemp("model") / "model"
    src.mkdir()
    data = os.urandom(size)
    (src / "weights.bin").write_bytes(data)
    repo = new_repo()
    push(str(src), f"{registry.host}/{repo}:v1")
    return repo, data


@pytest.fixture(scope="module")
def chunked(registry, tmp_path_factory):
    """A 20 MiB file pushed with ``--chunks``: (repo, its bytes)."""
    return _pushed(registry, tmp_path_factory, 20 * MiB + 321,
                   lambda src, dest: ocibridge.push(src, dest, options=ocibridge.PushOptions(chunk_threshold=16 * MiB)))


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
    assert names == {_b3(data[i * MiB:(i + 1) * MiB]) for i in (2, 3, 4)}
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
    _, digest = _read(ref, 3 * MiB, 3 * MiB + 10)
    stored = CacheChunks(model_cache_root())
    (path,) = stored.files()
    os.chmod(path, 0o644)
    path.write_bytes(b"\0" * MiB)  # the same size, other bytes
    got, _ = _read(ref, 3 * MiB, 3 * MiB + 10)
    assert got == data[3 * MiB:3 * MiB + 10]
    assert _layer_bytes(fault_proxy, digest) == 2 * DEFAULT_CHUNK_SIZE
    assert _b3(path.read_bytes()) == path.name


def test_concurrent_readers_share_the_cache(chunked, registry):
    repo, data = chunked
    ref = f"{registry.host}/{repo}:v1"
    results: list[bytes] = []
    errors: list[BaseException] = []

    def reader(start: int, end: int) -> None:
        try:
            results.append(_read(ref, start, end)[0])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    # chunk files: four readers of chunks 1-8
    threads = [threading.Thread(target=reader, args=(MiB, 9 * MiB)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [data[MiB:9 * MiB]] * 4
    stored = CacheChunks(model_cache_root())
    files = stored.files()
    assert len(files) == 8
    assert all(_b3(p.read_bytes()) == p.name for p in files)
    assert not [p for p in stored.dirs["blake3"].iterdir() if p not in files]  # no temporary file left
    # layer files: four readers of the whole file, each staging its own, one kept
    results.clear()
    threads = [threading.Thread(target=reader, args=(0, len(data))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [data] * 4
    (layer,) = _files("layers")  # (no temporary file left either)
    assert layer.read_bytes() == data


def test_prune_removes_chunks_first(chunked, registry):
    repo, _ = chunked
    _read(f"{registry.host}/{repo}:v1", MiB, 5 * MiB)
    cache = ModelCache(model_cache_root())
    assert len(CacheChunks(cache.root).files()) == 4
    done = prune(cache, max_size=2 * MiB + 512 * 1024)
    assert done.chunks == 2 and len(CacheChunks(cache.root).files()) == 2
    assert prune(cache, older_than=0).chunks == 2
    assert CacheChunks(cache.root).files() == []


def test_chunk_names_must_be_digests(tmp_path: Path):
    with pytest.raises(ValueError, match="not a chunk id"):
        CacheChunks(tmp_path).path("../x")
    with pytest.raises(ValueError, match="not a chunk id"):
        CacheChunks(tmp_path).path("md5:" + "ab" * 32)  # a hash no table may name


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


def _b3(data: bytes) -> str:
    """A chunk file's name: the chunk's digest in a table push writes (BLAKE3)."""
    return blake3.blake3(data).hexdigest()


def _files(kind: str) -> list[Path]:
    d = model_cache_root() / "chunks" / kind
    return sorted(d.iterdir()) if d.is_dir() else []


def _committed(kind: str) -> list[Path]:
    return [p for p in _files(kind) if not p.name.startswith(TEMP_PREFIX)]


def _read_pieces(ref: str, pieces: list[tuple[int, int]], **kw) -> tuple[list[bytes], str]:
    with open_model(ref, warn=None, **kw) as model:
        blob = model.open("weights.bin")
        return [blob.read(a, b) for a, b in pieces], blob.layer.digest


def _layer_key(ref: str) -> str:
    with open_model(ref, warn=None, cache=False) as model:
        blob = model.open("weights.bin")
        assert blob.chunks is not None
        return blob.chunks.content_key(blob.chunk_size)


def test_a_whole_read_from_the_first_byte_is_kept_as_one_layer_file(chunked, fault_proxy):
    """Sequential reads from byte 0 to the end leave one file, not one per chunk (21 here), and
    a later read of any range moves nothing."""
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    pieces = [(0, 8), (8, 3 * MiB)] + [(a, min(a + 3 * MiB, len(data))) for a in range(3 * MiB, len(data), 3 * MiB)]
    got, digest = _read_pieces(ref, pieces)
    assert b"".join(got) == data
    assert _files("blake3") == []
    (layer,) = _files("layers")
    assert layer.name == _layer_key(ref)
    assert layer.read_bytes() == data and layer.stat().st_mode & 0o777 == 0o444
    moved = _layer_bytes(fault_proxy, digest)
    assert moved == len(data)
    again, _ = _read(ref, 7 * MiB + 5, 19 * MiB)
    assert again == data[7 * MiB + 5:19 * MiB]
    assert _layer_bytes(fault_proxy, digest) == moved


def test_a_run_that_breaks_off_keeps_its_prefix_as_a_layer_file(chunked, fault_proxy):
    """Chunks 0-2 read in order, then a seek: 0-2 become a layer file of three chunks at once,
    while the file is still open (another process sees them), and the chunk after the seek a
    chunk file; reads of either move nothing more."""
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    chunk10 = _b3(data[10 * MiB:11 * MiB])
    with open_model(ref, warn=None) as model:
        blob = model.open("weights.bin")
        assert blob.read(0, 3 * MiB) == data[:3 * MiB]  # chunks 0-2: staged for a layer file
        assert blob.read(10 * MiB, 10 * MiB + 1) == data[10 * MiB:10 * MiB + 1]  # a seek: the run is over
        digest = blob.layer.digest
        deadline = time.monotonic() + 10
        # committed only: under load the poll saw the staged (temporary, half-written) file
        while not _committed("layers") and time.monotonic() < deadline:
            time.sleep(0.05)
        (layer,) = _committed("layers")
        kept = layer.read_bytes()  # chunks 0-2, and chunk 3 when the read-ahead brought it before the seek
        assert len(kept) in (3 * MiB, 4 * MiB), len(kept)  # every chunk read before the seek is in the prefix
        assert kept == data[:len(kept)] and layer.name == _layer_key(ref)
    assert [p.name for p in _files("blake3")] == [chunk10]
    assert [p.name for p in _files("layers")] == [layer.name]  # no temporary file left
    moved = _layer_bytes(fault_proxy, digest)
    again, _ = _read_pieces(ref, [(MiB + 5, 3 * MiB), (10 * MiB, 11 * MiB)])
    assert again == [data[MiB + 5:3 * MiB], data[10 * MiB:11 * MiB]]
    assert _layer_bytes(fault_proxy, digest) == moved
    beyond, _ = _read(ref, 2 * MiB, 4 * MiB)  # chunk 2 from the prefix, chunk 3 fetched unless kept
    fetched = MiB if len(kept) == 3 * MiB else 0
    assert beyond == data[2 * MiB:4 * MiB] and _layer_bytes(fault_proxy, digest) == moved + fetched


def test_a_run_from_the_first_byte_that_stops_short_is_a_prefix_then_completed(chunked, fault_proxy):
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    got, digest = _read_pieces(ref, [(0, 2 * MiB), (2 * MiB, 5 * MiB)])
    assert b"".join(got) == data[:5 * MiB]
    assert _files("blake3") == []
    (layer,) = _files("layers")
    assert layer.read_bytes() == data[:5 * MiB]
    # a whole read later: the five chunks from the prefix, the rest fetched, one whole file
    whole, _ = _read(ref, 0, len(data))
    assert whole == data and _layer_bytes(fault_proxy, digest) == len(data)
    (layer,) = _files("layers")
    assert layer.read_bytes() == data and _files("blake3") == []


def test_a_whole_read_uses_the_chunks_already_kept(chunked, fault_proxy):
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    _, digest = _read(ref, 2 * MiB, 5 * MiB)  # chunks 2-4, kept as chunk files
    whole, _ = _read(ref, 0, len(data))
    assert whole == data
    assert _layer_bytes(fault_proxy, digest) == len(data)  # 3 MiB first, the other 18 MiB + 321 after
    (layer,) = _files("layers")
    assert layer.read_bytes() == data


def test_a_damaged_layer_file_is_dropped_and_the_chunk_fetched_again(chunked, fault_proxy):
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    _, digest = _read(ref, 0, len(data))
    (layer,) = _files("layers")
    os.chmod(layer, 0o644)
    with layer.open("r+b") as f:  # chunk 7 changed, the size kept
        f.seek(7 * MiB + 100)
        f.write(b"\xff" * 10)
    moved = _layer_bytes(fault_proxy, digest)
    got, _ = _read(ref, 7 * MiB, 7 * MiB + 200)
    assert got == data[7 * MiB:7 * MiB + 200]
    assert _layer_bytes(fault_proxy, digest) == moved + MiB  # that chunk alone
    assert _files("layers") == []
    assert [p.name for p in _files("blake3")] == [_b3(data[7 * MiB:8 * MiB])]


def test_prune_goes_by_last_read_and_removes_orphans_of_killed_writers(chunked, registry):
    from ocibridge.core.fsutil import TEMP_PREFIX
    from ocibridge.core.stale import locked_tempfile

    repo, data = chunked
    ref = f"{registry.host}/{repo}:v1"
    _read(ref, 2 * MiB, 4 * MiB)  # chunks 2 and 3
    old = 1_000_000_000.0
    for p in _files("blake3"):
        os.utime(p, (old, old))
    _read(ref, 2 * MiB, 2 * MiB + 1)  # chunk 2 read again: used now
    orphan = model_cache_root() / "chunks" / "layers" / (TEMP_PREFIX + "killed")
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"x" * 1000)
    os.utime(orphan, (old, old))
    live_fd, live = locked_tempfile(orphan.parent)  # a writer still at work: its lock is held
    os.utime(live, (old, old))
    try:
        done = prune(ModelCache(model_cache_root()), older_than=3600)
        assert done.chunks == 1
        assert [p.name for p in _files("blake3")] == [_b3(data[2 * MiB:3 * MiB])]
        assert not orphan.exists() and Path(live).exists()
    finally:
        os.close(live_fd)


@pytest.fixture(scope="module")
def unchunked(registry, tmp_path_factory):
    """A 20 MiB file pushed without a chunk table: (repo, its bytes)."""
    from ocibridge.api.model_ops import push

    return _pushed(registry, tmp_path_factory, 20 * MiB + 123, push)


def _cached_blob(digest: str) -> Path:
    return model_cache_root() / "blobs" / "sha256" / digest.split(":", 1)[1]


@pytest.mark.parametrize("kind", ["chunked", "unchunked"])
def test_a_model_already_in_the_model_cache_is_read_from_there(kind, request, fault_proxy):
    """After ``ocibridge path`` the blobs are local: lazy reads move no byte of them, with a chunk
    table (each chunk checked against it) or without (the copy hashed against the layer digest)."""
    import ocibridge

    repo, data = request.getfixturevalue(kind)
    ref = f"{fault_proxy.host}/{repo}:v1"
    ocibridge.path(ref)
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
    moved = _layer_bytes(fault_proxy, digest)
    assert moved == len(data)  # the path's own fetch
    got, _ = _read(ref, 5 * MiB + 3, 9 * MiB)
    assert got == data[5 * MiB + 3:9 * MiB]
    assert _layer_bytes(fault_proxy, digest) == moved


@pytest.mark.parametrize("kind", ["chunked", "unchunked"])
def test_a_damaged_blob_in_the_model_cache_is_never_served(kind, request, fault_proxy):
    import ocibridge

    repo, data = request.getfixturevalue(kind)
    ref = f"{fault_proxy.host}/{repo}:v1"
    ocibridge.path(ref)
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
    blob = _cached_blob(digest)
    os.chmod(blob, 0o644)
    with blob.open("r+b") as f:
        f.seek(5 * MiB + 10)
        f.write(b"\x00\xff" * 8)
    moved = _layer_bytes(fault_proxy, digest)
    got, _ = _read(ref, 5 * MiB, 6 * MiB)
    assert got == data[5 * MiB:6 * MiB]
    # with a table, the one damaged chunk comes from the registry; without, the whole blob (its fill
    # goes on after the range asked for has arrived: the count is read once it has settled)
    want = MiB if kind == "chunked" else len(data)
    deadline = time.monotonic() + 10
    while _layer_bytes(fault_proxy, digest) - moved < want and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _layer_bytes(fault_proxy, digest) - moved == want
    assert blob.exists()  # the model cache's own file: not the lazy reader's to remove


def test_a_layer_file_is_never_replaced_by_a_shorter_one_and_orphans_go_when_staging(tmp_path: Path):
    from ocibridge.core.fsutil import TEMP_PREFIX

    store = CacheChunks(tmp_path)
    key = "ab" * 32
    orphan = store.layers / (TEMP_PREFIX + "killed-reader")
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"x" * 4096)
    os.utime(orphan, (1_000_000_000.0, 1_000_000_000.0))
    longer = store.stage_layer(key)
    assert longer is not None and not orphan.exists()  # swept as a new staging starts
    longer.write_at(0, b"a" * 100)
    longer.write_at(100, b"b" * 100)
    longer.commit()
    shorter = store.stage_layer(key)
    assert shorter is not None
    shorter.write_at(0, b"a" * 100)
    shorter.commit()
    stored = store.open_layer(key)
    assert stored is not None and stored.size() == 200 and stored.read_at(100, 100) == b"b" * 100
    stored.close()
    assert sorted(p.name for p in store.layers.iterdir()) == [key]


_SCRIPT = """
import sys, fsspec
fs = fsspec.filesystem("ocibridge")
f = fs.open(sys.argv[1] + "/weights.bin", "rb")
for _ in range(5):
    assert len(f.read(1024 * 1024)) == 1024 * 1024
if sys.argv[2] == "interrupt":
    raise KeyboardInterrupt
"""


@pytest.mark.parametrize("how", ["exit", "interrupt"])
def test_a_script_that_never_closes_its_file_leaves_a_prefix_not_a_dead_temporary(how, chunked, registry):
    """fsspec keeps models open: a script that reads the start of a file and exits (or is
    interrupted) must still leave what it read in the cache, as a prefix layer file."""
    import subprocess
    import sys

    repo, data = chunked
    done = subprocess.run([sys.executable, "-c", _SCRIPT, f"{registry.host}/{repo}:v1", how],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == (0 if how == "exit" else -2), done.stderr  # (-SIGINT: as Python dies of ^C)
    layers = _files("layers")
    assert [p.name for p in layers] == [_layer_key(f"{registry.host}/{repo}:v1")]  # no temporary file
    kept = layers[0].read_bytes()
    assert len(kept) >= 5 * MiB and len(kept) % MiB == 0 and kept == data[:len(kept)]


def test_only_exactly_64_hex_digits_name_a_chunk_file(tmp_path):
    """The three copies of the hex check (cache/chunks.py, chunks/chunkindex.py,
    chunks/chunkcache.py) are one (oci.digest.is_sha256_hex); the regular expressions it
    replaced ended in ``$``, which also took a name with a trailing newline."""
    from ocibridge.cache.chunks import CacheChunks
    from ocibridge.oci.digest import is_sha256_hex

    good = "ab" * 32
    assert is_sha256_hex(good)
    for bad in (good + "\n", good.upper(), good[:-1], good + "0", "../" + good[3:], ""):
        assert not is_sha256_hex(bad), bad
        with pytest.raises(ValueError):
            CacheChunks(tmp_path).path("blake3:" + bad)
    assert CacheChunks(tmp_path).path("blake3:" + good) == tmp_path / "chunks" / "blake3" / good
    assert CacheChunks(tmp_path).path("sha256:" + good) == tmp_path / "chunks" / "sha256" / good  # where it was
