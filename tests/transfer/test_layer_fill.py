"""A whole sequential read of a chunked layer is one pull-style fetch into the model cache's
layer file (issue 43: the whole file through the filesystem at a pull's cost), every byte
returned checked against the chunk table first; counted on the registry log."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import fsspec
import pytest
from support.faultproxy import corrupt, drop_response, status, throttle
from support.fixtures import new_repo

import ocibridge
from ocibridge.api.lazy_ops import open_model
from ocibridge.cache.chunks import CacheChunks
from ocibridge.cache.modelcache import model_cache_root
from ocibridge.chunks.chunktable import LayerChunks
from ocibridge.chunks.tablehash import TableHasher
from ocibridge.errors import DigestMismatch
from ocibridge.lazyread import blobreader
from ocibridge.stores.partial import PARTIAL_PREFIX

MiB = 1024 * 1024
SIZE = 12 * MiB + 321


@pytest.fixture(scope="module")
def chunked(registry, tmp_path_factory):
    """A 12 MiB file pushed with a chunk table: (repo, its bytes)."""
    src = tmp_path_factory.mktemp("fill") / "model"
    src.mkdir()
    data = os.urandom(SIZE)
    (src / "weights.bin").write_bytes(data)
    repo = new_repo()
    ocibridge.push(str(src), f"{registry.host}/{repo}:v1", options=ocibridge.PushOptions(chunk_threshold=MiB))
    return repo, data


@pytest.fixture(autouse=True)
def small_fills(monkeypatch):
    """Fills from 8 MiB, started by a run of 2 MiB (64 MiB and 4 MiB by default)."""
    monkeypatch.setattr(blobreader, "FILL_MIN_SIZE", 8 * MiB)
    monkeypatch.setattr(blobreader, "FILL_AFTER", 2 * MiB)


def _layer_bytes(proxy, digest: str) -> int:
    return sum(r.response_bytes for r in proxy.requests_matching("GET", f"/blobs/{digest}"))


def _ranges(proxy, digest: str) -> list[str]:
    return [r.headers.get("range", "") for r in proxy.requests_matching("GET", f"/blobs/{digest}")]


def _layer_files() -> list[str]:
    layers = CacheChunks(model_cache_root()).layers
    return sorted(p.name for p in layers.iterdir()) if layers.is_dir() else []


def _read_all(ref: str, piece: int) -> tuple[bytes, str]:
    fs = fsspec.filesystem("ocibridge", skip_instance_cache=True)
    out = bytearray()
    with fs.open(f"{ref}/weights.bin", "rb") as f:
        while chunk := f.read(piece):
            out += chunk
    model = fs.model(ref)
    digest = model.file("weights.bin").layer.digest
    model.close()
    return bytes(out), digest


def test_a_whole_read_is_one_fetch_kept_as_the_layer_file(chunked, fault_proxy):
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    got, digest = _read_all(ref, 4 * MiB)
    assert got == data
    assert _layer_bytes(fault_proxy, digest) == SIZE  # once: the opening read started the fill
    # one request for the whole blob, as a pull asks (chunk reads ask bounded ranges)
    assert _ranges(fault_proxy, digest) in ([""], ["bytes=0-"])
    (name,) = _layer_files()
    kept = CacheChunks(model_cache_root()).layers / name
    assert kept.stat().st_mode & 0o777 == 0o444  # read-only, as the layer files chunk reads keep
    assert hashlib.sha256(kept.read_bytes()).hexdigest() == digest.split(":")[1]
    again, _ = _read_all(ref, 4 * MiB)  # from the layer file, checked chunk by chunk
    assert again == data
    assert _layer_bytes(fault_proxy, digest) == SIZE


def test_small_reads_start_the_fill_after_a_run(chunked, fault_proxy):
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    got, digest = _read_all(ref, 256 * 1024)
    assert got == data
    moved = _layer_bytes(fault_proxy, digest)
    # the chunks of the first 2 MiB (and what they read ahead), then the whole layer once
    assert SIZE <= moved <= SIZE + 4 * MiB
    assert {"", "bytes=0-"} & set(_ranges(fault_proxy, digest))  # the fill's one request
    assert len(_layer_files()) == 1


def test_a_run_whose_reads_arrive_out_of_order_still_starts_the_fill(chunked, fault_proxy):
    """The kernel sends a sequential reader's read-ahead as several requests, which the FUSE
    loop's threads hand over in any order: pairs swapped are still one run from byte 0."""
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    piece = 256 * 1024
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
        for pair in range(0, 4 * MiB, 2 * piece):
            for at in (pair + piece, pair):  # the second request of each pair first
                assert model.read("weights.bin", at, at + piece) == data[at:at + piece]
    assert {"", "bytes=0-"} & set(_ranges(fault_proxy, digest))  # the fill's one request


@pytest.mark.parametrize("first", [
    [MiB, 0, MiB // 2],  # the opening request past byte 0 (chunk 1 before chunk 0)
    [0, MiB // 2, 3 * MiB],  # chunk 3 overtakes chunks 1 and 2
], ids=["opened-past-byte-0", "overtaken-by-two"])
def test_a_run_of_1mib_requests_out_of_order_still_starts_the_fill(chunked, fault_proxy, first):
    """With the mount's read-ahead of 1 MiB (``lazymount.readahead``) the kernel's requests
    arrive one chunk each, in any order: one that opens the run at chunk 1, or overtakes by two
    chunks, is still the run from byte 0 (within RUN_SLACK), as the fill counts it. Before, it
    ended the chunk store's run, the chunks read went to chunk files, and a layer of which the
    store holds chunks is read chunk by chunk: no fill (measured: 3 of 4 cold cats)."""
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    piece = MiB // 2
    order = first + [at for at in range(0, SIZE, piece) if at not in first]
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
        for at in order:
            assert model.read("weights.bin", at, at + piece) == data[at:at + piece]
    assert {"", "bytes=0-"} & set(_ranges(fault_proxy, digest))  # the fill's one request
    assert _layer_bytes(fault_proxy, digest) <= SIZE + 4 * MiB


def test_a_reader_that_skips_ahead_is_no_whole_read(chunked, fault_proxy):
    """Small reads far apart (a tensor here and there) reach FILL_AFTER without reading half of
    it: no fill, only the chunks they need."""
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
        for at in range(0, 4 * MiB, MiB):
            assert model.read("weights.bin", at, at + 1024) == data[at:at + 1024]
    assert not {"", "bytes=0-"} & set(_ranges(fault_proxy, digest))
    assert _layer_bytes(fault_proxy, digest) < SIZE


def test_two_tensors_near_the_start_are_no_whole_read(chunked, fault_proxy):
    """Two reads of 1 MiB, each within RUN_SLACK of the other, reach past FILL_AFTER with more
    than half of FILL_AFTER read, but only a third of what they reach: chunk reads, no fill."""
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
        for at in (0, 5 * MiB):
            assert model.read("weights.bin", at, at + MiB) == data[at:at + MiB]
    assert not {"", "bytes=0-"} & set(_ranges(fault_proxy, digest))
    assert _layer_bytes(fault_proxy, digest) <= 2 * MiB


def test_a_tampered_blob_returns_no_byte_and_keeps_nothing(chunked, fault_proxy):
    repo, _ = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
        fault_proxy.add("GET", f"/blobs/{digest}", corrupt(offset=100), times=None)
        with pytest.raises(DigestMismatch, match="chunk 0 .* chunk table"):
            model.read("weights.bin", 0, 4 * MiB)
        assert _ranges(fault_proxy, digest) in ([""], ["bytes=0-"])  # refused by the fill
    assert _layer_files() == []  # neither the layer file nor its partial file


def test_closing_mid_read_stops_the_fetch_and_the_next_read_resumes(chunked, fault_proxy):
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
        # the bytes read at once, the rest of the whole at 1 MiB/s: 10 s
        fault_proxy.add("GET", f"/blobs/{digest}", throttle(MiB, unpaced=2 * MiB), times=None)
        assert model.read("weights.bin", 0, 2 * MiB) == data[:2 * MiB]
    first = _layer_bytes(fault_proxy, digest)
    assert first < SIZE  # the close did not wait for the rest of the layer
    assert any(name.startswith(PARTIAL_PREFIX) for name in _layer_files())
    fault_proxy.clear()
    got, _ = _read_all(ref, 4 * MiB)
    assert got == data
    # the rest, not the whole layer again (a part cut mid-buffer is asked from where it stood)
    assert _layer_bytes(fault_proxy, digest) - first < SIZE
    assert not any(name.startswith(PARTIAL_PREFIX) for name in _layer_files())


def test_two_whole_readers_at_once_share_one_fetch(chunked, fault_proxy):
    """The second reader's fill waits for the first's (a lock on the partial file), finds the
    layer file in place, and reads it back chunk by chunk: the layer moves once."""
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    results: list[bytes] = []
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            with open_model(ref, warn=None) as model:
                out = [model.read("weights.bin", at, min(at + 4 * MiB, SIZE)) for at in range(0, SIZE, 4 * MiB)]
            results.append(b"".join(out))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [data, data]
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
    assert _layer_bytes(fault_proxy, digest) == SIZE
    assert len(_layer_files()) == 1


EXITS_MID_READ = """
import sys, time
from ocibridge.api.lazy_ops import open_model
from ocibridge.lazyread import blobreader
blobreader.FILL_MIN_SIZE, blobreader.FILL_AFTER = 8 << 20, 2 << 20
model = open_model(sys.argv[1], warn=None)
assert len(model.read("weights.bin", 0, 2 << 20)) == 2 << 20
print(time.monotonic(), flush=True)  # and exits, the model never closed
"""


def test_a_process_that_exits_mid_read_does_not_wait_for_the_layer(chunked, fault_proxy):
    repo, _ = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
    # the bytes read at once, the rest of the whole at 1 MiB/s: 10 s
    fault_proxy.add("GET", f"/blobs/{digest}", throttle(MiB, unpaced=2 * MiB), times=None)
    done = subprocess.run([sys.executable, "-c", EXITS_MID_READ, ref], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.stdout.strip()  # it read, then exited
    assert _layer_bytes(fault_proxy, digest) < SIZE  # without waiting for the rest of the layer
    assert f"{PARTIAL_PREFIX}{digest.split(':')[1]}" in _layer_files()  # at its name: resumed next time


# -- the hasher alone -----------------------------------------------------------------------
def _table(data: bytes, chunk: int) -> LayerChunks:
    pieces = [data[i:i + chunk] for i in range(0, len(data), chunk)]
    return LayerChunks("sha256:" + hashlib.sha256(data).hexdigest(), len(data),
                       tuple(hashlib.sha256(p).hexdigest() for p in pieces), "sha256")


@pytest.mark.parametrize("step", [1, 7, 100, 4096])
def test_the_hasher_checks_chunks_across_any_update_sizes(step):
    data = os.urandom(1000)
    hasher = TableHasher(_table(data, 64), 64)
    for at in range(0, len(data), step):
        hasher.update(data[at:at + step])
        assert hasher.verified == min(len(data), (at + step) // 64 * 64) or hasher.verified == len(data)
    assert hasher.verified == len(data)
    assert hasher.hexdigest() == hashlib.sha256(data).hexdigest()


def test_the_hasher_stops_at_a_wrong_chunk_and_never_vouches_again():
    data = bytearray(os.urandom(1000))
    table = _table(bytes(data), 64)
    data[200] ^= 1  # chunk 3
    hasher = TableHasher(table, 64)
    hasher.update(data)
    assert hasher.failed_chunk == 3
    assert hasher.verified == 3 * 64
    assert hasher.hexdigest() == ""


def test_the_hasher_refuses_more_bytes_than_the_table_covers():
    data = os.urandom(130)
    hasher = TableHasher(_table(data, 64), 64)
    hasher.update(data + b"x")
    assert hasher.verified == 130
    assert hasher.hexdigest() == ""


def test_a_fill_that_ended_does_not_hold_its_lock_while_its_reader_stays_open(chunked, fault_proxy):
    """A reader whose fill waits for another's goes on when that fill has ended, not when the
    reader that made it is closed (an fsspec file may stay open for the life of a process)."""
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    got: list[bytes | BaseException] = []
    with open_model(ref, warn=None) as first:
        digest = first.file("weights.bin").layer.digest
        fault_proxy.add("GET", f"/blobs/{digest}", throttle(4 * MiB), times=None)  # the whole: 3 s
        assert first.read("weights.bin", 0, 2 * MiB) == data[:2 * MiB]  # its fill holds the lock
        second = open_model(ref, warn=None)

        def read_second() -> None:
            try:
                got.append(second.read("weights.bin", 0, 2 * MiB))
            except BaseException as e:  # noqa: BLE001 - checked below
                got.append(e)

        waiting = threading.Thread(target=read_second, daemon=True)
        waiting.start()
        assert first.read("weights.bin", 0, SIZE) == data  # the first fill has ended
        waiting.join(10)
        alive = waiting.is_alive()
    waiting.join(30)  # (closing the first reader let it go on, if nothing else did)
    second.close()
    assert not alive  # it went on before the first reader was closed
    assert got == [data[:2 * MiB]]


def test_closing_a_reader_whose_fill_waits_for_another_does_not_wait_for_the_layer(chunked, fault_proxy):
    """A second reader's fill waits on the first's lock of the partial file: closing the second
    reader stops that wait too (it does not last until the first has fetched the whole layer)."""
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    with open_model(ref, warn=None) as first:
        digest = first.file("weights.bin").layer.digest
        fault_proxy.add("GET", f"/blobs/{digest}", throttle(MiB), times=None)  # the whole: 12 s
        assert first.read("weights.bin", 0, 2 * MiB) == data[:2 * MiB]  # its fill holds the lock
        second = open_model(ref, warn=None)
        got: list[bytes | BaseException] = []

        def read_second() -> None:
            try:
                got.append(second.read("weights.bin", 0, 2 * MiB))
            except BaseException as e:  # noqa: BLE001 - checked below
                got.append(e)

        waiting = threading.Thread(target=read_second)
        waiting.start()
        time.sleep(0.5)  # its fill is waiting for the lock
        second.close()
        fetched = sum(r.response_bytes for r in fault_proxy.requests_matching("GET", f"/blobs/{digest}"))
        waiting.join(30)
        assert fetched < first.file("weights.bin").layer.size, "the close waited for the first's whole layer"
        assert got and (not isinstance(got[0], bytes) or got[0] == data[:2 * MiB])


def _leave_damaged_partial(digest: str, data: bytes, flip: int) -> Path:
    """The partial file an earlier fill left: the layer's first 6 MiB with byte ``flip`` changed;
    the chunk cache's layers directory."""
    layers = CacheChunks(model_cache_root()).layers
    layers.mkdir(parents=True, exist_ok=True)
    left = bytearray(data[:6 * MiB])
    left[flip] ^= 0xFF
    (layers / f"{PARTIAL_PREFIX}{digest.split(':')[1]}").write_bytes(left)
    return layers


def test_a_damaged_partial_file_and_a_cut_fetch_leave_the_read_to_the_chunks(chunked, fault_proxy):
    """A wrong byte in what an earlier fill left is no wrong byte from the registry: when the
    resumed fetch then stops (a dropped connection), the read goes on by chunks."""
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
        _leave_damaged_partial(digest, data, flip=100)  # chunk 0 of the file an earlier fill left
        fault_proxy.add("GET", f"/blobs/{digest}", drop_response(after=1000), times=1)
        fault_proxy.add("GET", f"/blobs/{digest}", status(404), times=1)  # (its retry)
        assert model.read("weights.bin", 0, 4 * MiB) == data[:4 * MiB]


def test_a_damaged_partial_file_is_fetched_again_and_no_wrong_byte_is_read(chunked, fault_proxy):
    """The resumed fetch fails on the damaged chunk, the download cuts the file and starts
    over: every read returns the layer's bytes, and the layer file kept is the layer."""
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
        layers = _leave_damaged_partial(digest, data, flip=3 * MiB + 5)  # chunk 3: chunks 0-2 check
        got = b"".join(model.read("weights.bin", at, min(at + 2 * MiB, SIZE)) for at in range(0, SIZE, 2 * MiB))
    assert got == data
    (name,) = _layer_files()
    assert hashlib.sha256((layers / name).read_bytes()).hexdigest() == digest.split(":")[1]


def test_a_damaged_partial_file_is_fetched_again_from_its_checked_prefix(chunked, fault_proxy, monkeypatch):
    """The bytes the fill checked before the damaged chunk are never written again (a mount may
    be answering from them by descriptor, after its check): the download starts over from the
    checked prefix, not from byte 0."""
    from ocibridge.stores import partial

    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    cut: list[int] = []
    ftruncate = os.ftruncate

    def recorded(fd: int, size: int) -> None:
        cut.append(size)
        ftruncate(fd, size)

    monkeypatch.setattr(partial.os, "ftruncate", recorded)
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
        _leave_damaged_partial(digest, data, flip=3 * MiB + 5)  # chunk 3: chunks 0-2 check
        got = b"".join(model.read("weights.bin", at, min(at + 2 * MiB, SIZE)) for at in range(0, SIZE, 2 * MiB))
    assert got == data
    assert 3 * MiB in cut and min(cut) >= 3 * MiB, cut


def test_a_fill_that_fails_sets_its_partial_file_aside_until_closed(chunked, fault_proxy):
    """While its reader is open, a failed fill's file is out of other downloads' reach (a mount
    may still answer from it by descriptor); closed, it is back for a later resume."""
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
        named = CacheChunks(model_cache_root()).layers / f"{PARTIAL_PREFIX}{digest.split(':')[1]}"
        fault_proxy.add("GET", f"/blobs/{digest}", drop_response(after=1000), times=1)
        fault_proxy.add("GET", f"/blobs/{digest}", status(404), times=1)  # (its retry)
        assert model.read("weights.bin", 0, 4 * MiB) == data[:4 * MiB]  # by chunks, once the fill failed
        assert not named.exists()
        assert [p.name for p in named.parent.glob(f"{named.name}.failed-*")]
    assert named.exists()
    assert not list(named.parent.glob(f"{named.name}.failed-*"))


EXITS_AFTER_A_FAILED_FILL = """
import sys
from ocibridge.api.lazy_ops import open_model
from ocibridge.lazyread import blobreader
blobreader.FILL_MIN_SIZE, blobreader.FILL_AFTER = 8 << 20, 2 << 20
model = open_model(sys.argv[1], warn=None)
assert len(model.read("weights.bin", 0, 4 << 20)) == 4 << 20  # by chunks, once the fill failed
blob = model.open("weights.bin")
assert blob._fill is not None and blob._fill.failed and blob._fill._set_aside is not None
# and exits, the model never closed
"""


def test_a_failed_fill_set_aside_is_put_back_when_the_process_exits(chunked, fault_proxy):
    repo, _ = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    with open_model(ref, warn=None) as model:
        digest = model.file("weights.bin").layer.digest
    named = f"{PARTIAL_PREFIX}{digest.split(':')[1]}"
    fault_proxy.add("GET", f"/blobs/{digest}", drop_response(after=1000), times=1)
    fault_proxy.add("GET", f"/blobs/{digest}", status(404), times=1)  # (its retry)
    subprocess.run([sys.executable, "-c", EXITS_AFTER_A_FAILED_FILL, ref], check=True,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert named in _layer_files()
    assert not [name for name in _layer_files() if ".failed-" in name]


def test_a_read_longer_than_one_pread_gives_is_answered_by_the_fill(chunked, fault_proxy, monkeypatch):
    """One pread(2) returns at most 0x7ffff000 bytes on Linux, so a single read of a layer of
    2 GiB or more (``model.read(path)``) comes from the filled file in several: here each is
    cut at 3 MiB. The fill answers it, not the chunk reads after a "short" file."""
    repo, data = chunked
    ref = f"{fault_proxy.host}/{repo}:v1"
    pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: pread(fd, min(n, 3 * MiB), at))

    def by_chunks(*args, **kwargs):
        raise AssertionError("read by chunks")

    with open_model(ref, warn=None) as model:
        monkeypatch.setattr(blobreader.VerifiedBlob, "_chunks", by_chunks)
        assert model.read("weights.bin") == data


def test_a_read_of_a_blob_without_a_table_longer_than_one_pread(registry, tmp_path_factory, monkeypatch):
    """Without a chunk table the blob is read whole into a spool file and ranges come from there:
    a read longer than one pread(2) gives (2 GiB on Linux; cut at 3 MiB here) is whole too."""
    import ocibridge

    src = tmp_path_factory.mktemp("spool") / "model"
    src.mkdir()
    data = os.urandom(9 * MiB + 5)
    (src / "weights.bin").write_bytes(data)
    ref = f"{registry.host}/{new_repo()}:v1"
    ocibridge.push(str(src), ref, options=ocibridge.PushOptions(chunks=False))
    pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: pread(fd, min(n, 3 * MiB), at))
    with open_model(ref, warn=None) as model:
        assert model.read("weights.bin") == data
