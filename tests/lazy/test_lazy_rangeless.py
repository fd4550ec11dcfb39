"""A registry (here: a proxy in front of it) that answers every Range with 200 and the whole
blob: lazy reads fetch each blob whole once, verified, and serve every range from that copy,
instead of fetching from byte 0 again for each range (a quadratic amount: reading a file of N
chunks in order moved ~N²/2 chunks). The first answer, to a Range from byte 0, is that copy.
The bytes stay right, a forged whole answer is refused,
and a registry that honours ranges still gets them."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from safetensors.numpy import save_file
from support.faultproxy import FaultProxy, Serve, ignore_range, status
from support.fixtures import new_repo

import ocibridge
from ocibridge.errors import DigestMismatch
from ocibridge.lazyread.rangeless import forget_rangeless

CHUNK = 64 * 1024
TABLE = ocibridge.PushOptions(chunk_threshold=1, chunk_size=CHUNK)
#: spans of 4 chunks, 2 in flight: many ranges per file
SMALL_PARTS = ocibridge.TransferOptions(part_size=4 * CHUNK, parts_in_flight=2)
CHUNKS = 24


@pytest.fixture(autouse=True)
def _forget_hosts():
    """The proxy's port may come back for another test's proxy: forget what was noted."""
    yield
    forget_rangeless()


@pytest.fixture(scope="module")
def pushed(registry, tmp_path_factory):
    """A raw file of CHUNKS chunks and a safetensors model, both with a chunk table:
    (repo, raw bytes, tensors)."""
    src = tmp_path_factory.mktemp("rangeless") / "model"
    src.mkdir()
    raw = np.random.default_rng(7).integers(0, 255, CHUNKS * CHUNK - 1000, dtype=np.uint8).tobytes()
    (src / "weights.bin").write_bytes(raw)
    rng = np.random.default_rng(8)
    tensors = {f"layer.{i}": rng.standard_normal((128, 256), dtype=np.float32) for i in range(12)}
    save_file(tensors, str(src / "model.safetensors"))
    (src / "config.json").write_text('{"model_type": "test"}')
    repo = new_repo()
    result = ocibridge.push(str(src), f"{registry.host}/{repo}:v1", options=TABLE)
    assert "chunks" in result.extra
    return repo, raw, tensors


def layer_of(host: str, repo: str, path: str):
    with ocibridge.open_model(f"{host}/{repo}:v1", warn=None, cache=False) as model:
        return model.file(path).layer


def blob_gets(proxy: FaultProxy, digest: str):
    return proxy.requests_matching("GET", f"/blobs/{digest}")


@pytest.mark.parametrize("cache", [False, True])
def test_chunk_reads_in_order_move_the_blob_about_once(pushed, registry, fault_proxy, cache, caplog):
    repo, raw, _ = pushed
    layer = layer_of(registry.host, repo, "weights.bin")
    fault_proxy.add("GET", f"/blobs/{layer.digest}", ignore_range(), times=None)
    got = []
    with caplog.at_level(logging.WARNING, "ocibridge.lazyread"), \
            ocibridge.open_model(f"{fault_proxy.host}/{repo}:v1", warn=None, cache=cache) as model:
        for i in range(CHUNKS):
            got.append(model.read("weights.bin", i * CHUNK, (i + 1) * CHUNK))
            got.append(model.read("weights.bin", i * CHUNK, i * CHUNK + 10))  # read again: nothing moves
    assert b"".join(got[::2]) == raw
    assert all(again == whole[:10] for whole, again in zip(got[::2], got[1::2], strict=True))
    gets = blob_gets(fault_proxy, layer.digest)
    moved = sum(r.response_bytes for r in gets)
    # the first answer (to chunk 0's Range, from byte 0) is the whole blob: kept, nothing more asked
    assert moved <= 1.1 * layer.size and len(gets) == 1, (moved, layer.size, len(gets))
    notices = [r for r in caplog.records if "answers range requests with whole blobs" in r.getMessage()]
    assert len(notices) == 1 and fault_proxy.host in notices[0].getMessage()


@pytest.mark.parametrize("at", [11 * CHUNK + 300, CHUNKS * CHUNK - 1100])
def test_a_small_read_past_byte_0_moves_the_blob_once(pushed, registry, fault_proxy, at):
    """The 200 to a Range from mid-blob is kept whole (its front too): no second request."""
    repo, raw, _ = pushed
    layer = layer_of(registry.host, repo, "weights.bin")
    fault_proxy.add("GET", f"/blobs/{layer.digest}", ignore_range(), times=None)
    with ocibridge.open_model(f"{fault_proxy.host}/{repo}:v1", warn=None, cache=False) as model:
        assert model.read("weights.bin", at, at + 10) == raw[at:at + 10]
        gets = blob_gets(fault_proxy, layer.digest)
        assert [r.response_bytes for r in gets] == [layer.size], [(r.range, r.response_bytes) for r in gets]
        assert gets[0].status == 200
        assert model.read("weights.bin", 3 * CHUNK + 5, 5 * CHUNK) == raw[3 * CHUNK + 5:5 * CHUNK]
        assert model.read("weights.bin", 0, 7) == raw[:7]
    assert len(blob_gets(fault_proxy, layer.digest)) == 1  # later reads, at other offsets: asked nothing


def test_load_tensors_moves_each_file_about_once(pushed, registry, fault_proxy):
    repo, _, tensors = pushed
    layer = layer_of(registry.host, repo, "model.safetensors")
    fault_proxy.add("GET", f"/blobs/{layer.digest}", ignore_range(), times=None)
    got = ocibridge.load_tensors(f"{fault_proxy.host}/{repo}:v1", transfer=SMALL_PARTS)
    assert sorted(got) == sorted(tensors)
    assert all(got[name].tobytes() == array.tobytes() for name, array in tensors.items())
    gets = blob_gets(fault_proxy, layer.digest)
    moved = sum(r.response_bytes for r in gets)
    assert layer.size > 4 * SMALL_PARTS.part_size  # several spans
    assert moved <= 1.1 * layer.size and len(gets) == 1, (moved, layer.size, len(gets))


def test_a_forged_whole_answer_is_refused(pushed, registry, fault_proxy):
    repo, _, _ = pushed
    layer = layer_of(registry.host, repo, "weights.bin")
    fault_proxy.add("GET", f"/blobs/{layer.digest}", ignore_range(flip=CHUNKS * CHUNK // 2), times=None)
    for start in (0, 20 * CHUNK):  # from mid-blob: the flipped byte is in the front kept, refused
        forget_rangeless()  # each read's first answer is the 200 to its own Range
        with ocibridge.open_model(f"{fault_proxy.host}/{repo}:v1", warn=None, cache=False) as model, \
                pytest.raises(DigestMismatch):
            model.read("weights.bin", start, start + 10)
    tensor_layer = layer_of(registry.host, repo, "model.safetensors")
    fault_proxy.add("GET", f"/blobs/{tensor_layer.digest}", ignore_range(flip=tensor_layer.size - 5), times=None)
    with pytest.raises(DigestMismatch):
        ocibridge.load_tensors(f"{fault_proxy.host}/{repo}:v1", transfer=SMALL_PARTS)


def test_a_whole_answer_longer_than_the_blob_is_refused(pushed, registry, fault_proxy):
    """A 200 that carries more bytes than the descriptor's size, to a Range from mid-blob, is
    refused as the copy is spooled (the read bound is the descriptor's size), never served."""
    repo, raw, _ = pushed
    layer = layer_of(registry.host, repo, "weights.bin")
    longer = status(200, body=raw + b"\0" * CHUNK, headers={"Content-Type": "application/octet-stream"})
    fault_proxy.add("GET", f"/blobs/{layer.digest}", Serve(lambda _proxy, _rec, _body: longer), times=None)
    with ocibridge.open_model(f"{fault_proxy.host}/{repo}:v1", warn=None, cache=False) as model, \
            pytest.raises(DigestMismatch, match="more than the expected"):
        model.read("weights.bin", 9 * CHUNK, 9 * CHUNK + 10)


def test_a_registry_that_honours_ranges_still_gets_them(pushed, registry, fault_proxy):
    """Another host ignoring ranges (noted for the process) changes nothing for this one."""
    repo, raw, tensors = pushed
    layer = layer_of(registry.host, repo, "weights.bin")
    fault_proxy.add("GET", f"/blobs/{layer.digest}", ignore_range(), times=None)
    with ocibridge.open_model(f"{fault_proxy.host}/{repo}:v1", warn=None, cache=False) as model:
        assert model.read("weights.bin", CHUNK, 2 * CHUNK) == raw[CHUNK:2 * CHUNK]
    honest = FaultProxy(registry)
    try:
        with ocibridge.open_model(f"{honest.host}/{repo}:v1", warn=None, cache=False) as model:
            for i in range(4):
                assert model.read("weights.bin", i * CHUNK, (i + 1) * CHUNK) == raw[i * CHUNK:(i + 1) * CHUNK]
        got = ocibridge.load_tensors(f"{honest.host}/{repo}:v1", transfer=SMALL_PARTS)
        assert all(got[name].tobytes() == array.tobytes() for name, array in tensors.items())
        ranged = [r for r in honest.requests_matching("GET", "/blobs/") if r.range]
        assert len(ranged) > 4 and all(r.status == 206 for r in ranged), [(r.range, r.status) for r in ranged]
    finally:
        honest.stop()


@pytest.mark.parametrize("start", [0, 5 * CHUNK])
def test_a_whole_answer_past_the_read_budget_is_refused_and_closed(pushed, registry, fault_proxy, monkeypatch,
                                                                   start):
    """The 200 to a Range is the whole copy's first bytes; a budget that has no room
    for the whole blob refuses it, and that answer (its connection, its prefetch) is closed."""
    from ocibridge.lazyread.budget import OverBudget, ReadBudget
    from ocibridge.lazyread.rangeless import WholeWhenRangeless
    from ocibridge.oci.reference import parse_registry_reference
    from ocibridge.stores.registry.store import open_repository

    repo, _, _ = pushed
    layer = layer_of(registry.host, repo, "weights.bin")
    fault_proxy.add("GET", f"/blobs/{layer.digest}", ignore_range(), times=None)
    store = open_repository(parse_registry_reference(f"{fault_proxy.host}/{repo}:v1"))
    opened, closed = [], []
    asked = store.open_blob_range

    def noting(*args, **kwargs):  # the store's own answer, its close noted
        reader = asked(*args, **kwargs)
        shut = reader.close
        monkeypatch.setattr(reader, "close", lambda: (closed.append(reader), shut())[1])
        opened.append(reader)
        return reader

    monkeypatch.setattr(store, "open_blob_range", noting)
    ranges = WholeWhenRangeless(store, ReadBudget(layer.size // 2))
    try:
        with pytest.raises(OverBudget):
            ranges.open_blob_range(layer, start, start + CHUNK)
        assert len(opened) == 1 and closed == opened
    finally:
        ranges.close()
        store.close()


def test_a_host_noted_as_ignoring_ranges_is_asked_ranges_again_once_the_note_lapses(monkeypatch, caplog):
    """One stray whole answer (a CDN's) is no rule for the rest of a long-running process."""
    from ocibridge.lazyread import rangeless

    now = [1000.0]
    monkeypatch.setattr(rangeless.time, "monotonic", lambda: now[0])
    forget_rangeless()
    with caplog.at_level(logging.WARNING, logger="ocibridge.lazyread"):
        rangeless.note_rangeless("cdn.example/team/model")
        assert rangeless.ignores_ranges("cdn.example/other") and not rangeless.ignores_ranges("reg.example/x")
        now[0] += rangeless.NOTE_LIFETIME - 1
        assert rangeless.ignores_ranges("cdn.example/team/model")
        now[0] += 2
        assert not rangeless.ignores_ranges("cdn.example/team/model")  # lapsed: its ranges asked again
        rangeless.note_rangeless("cdn.example/team/model")  # and it ignored them again
        assert rangeless.ignores_ranges("cdn.example/team/model")
    assert sum("cdn.example answers range requests" in r.getMessage() for r in caplog.records) == 1  # said once
    forget_rangeless()
