"""load_tensors(framework="torch") from the real registry (issue 89): torch tensors equal
safetensors.torch's own load of the pulled file, tensor for tensor, for every dtype torch has
(bf16 and f8 included, which numpy lacks), in host memory and on a device: ``device="cpu"``
runs the device path (tensors allocated on the device, bytes staged through rings of host
memory, checked there before any copy), as CUDA does with pinned rings. A tampered chunk and a
refusing policy are handled as for numpy; a CUDA device on a machine without one is one error
line, before any request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file
from support.faultproxy import corrupt_at
from support.fixtures import new_repo

import ocibridge
from ocibridge.errors import OcibridgeError, SignatureError
from ocibridge.lazyread import tensorload
from ocibridge.lazyread.placement import Landing, Slot
from ocibridge.lazyread.safetensors import TensorInfo
from tests.lazy.test_load_tensors import CHUNK, SMALL_PARTS, TABLE, layer_of, offset_of

#: every dtype of safetensors this torch has a type for (float8 too)
DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.int64, torch.int32, torch.int16,
          torch.int8, torch.uint8, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2)


def tensors(seed: int) -> dict[str, torch.Tensor]:
    """A tensor of each dtype (odd sizes, a scalar, an empty one), ~2 MiB: tensors across chunks."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for i, dtype in enumerate(DTYPES):
        shape = (37 + 11 * i, 129)
        if dtype.is_floating_point:
            out[f"layers.{i}.{str(dtype).removeprefix('torch.')}"] = torch.randn(shape, generator=g).to(dtype)
        elif dtype == torch.bool:
            out[f"layers.{i}.mask"] = torch.rand(shape, generator=g) > 0.5
        else:
            out[f"layers.{i}.{str(dtype).removeprefix('torch.')}"] = torch.randint(-100 if dtype != torch.uint8 else 0,
                                                                                   100, shape, generator=g, dtype=dtype)
    out["embed.weight"] = torch.randn((1200, 256), generator=g).to(torch.bfloat16)  # 600 KiB: several chunks
    out["scale"] = torch.tensor(2.5, dtype=torch.float32)
    out["empty"] = torch.zeros((0, 4), dtype=torch.bfloat16)
    return out


@pytest.fixture(scope="module")
def models(registry, tmp_path_factory):
    """One model pushed with a chunk table and without: name -> (reference, the pulled file, repository)."""
    work = tmp_path_factory.mktemp("torch")
    src = work / "src"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "test"}')
    save_file(tensors(1), str(src / "model.safetensors"), metadata={"format": "pt"})
    out = {}
    for name, options in (("table", TABLE), ("plain", ocibridge.PushOptions(chunks=False))):
        repo = new_repo()
        pushed = ocibridge.push(str(src), f"{registry.host}/{repo}:v1", options=options)
        assert ("chunks" in pushed.extra) == options.chunks, name
        pulled = work / f"pulled-{name}"
        ocibridge.pull(pushed.reference, str(pulled))
        out[name] = (pushed.reference, pulled / "model.safetensors", repo)
    return out


def raw(t: torch.Tensor) -> bytes:
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


def assert_same(got: dict[str, Any], want: dict[str, torch.Tensor], device: str = "cpu") -> None:
    assert sorted(got) == sorted(want)
    for name, tensor in want.items():
        g = got[name]
        assert isinstance(g, torch.Tensor) and g.device == torch.device(device), name
        assert g.dtype == tensor.dtype and g.shape == tensor.shape, name
        assert raw(g) == raw(tensor), name
        if tensor.dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):  # (torch.equal has no float8 on CPU)
            assert torch.equal(g, tensor), name


def in_file_order(path: Path) -> dict[str, torch.Tensor]:
    """safetensors.torch.load_file of ``path``, in the order of the tensors' bytes in the file."""
    data = path.read_bytes()
    header = json.loads(data[8:8 + int.from_bytes(data[:8], "little")])
    header.pop("__metadata__", None)
    loaded = load_file(str(path))
    return {name: loaded[name] for name in sorted(header, key=lambda n: tuple(header[n]["data_offsets"]))}


@pytest.mark.parametrize("which", ["table", "plain"])
@pytest.mark.parametrize("device", [None, "cpu"])
def test_torch_tensors_equal_safetensors_torch_load_file(models, which, device):
    ref, pulled, _ = models[which]
    want = in_file_order(pulled)
    assert {t.dtype for t in want.values()} >= set(DTYPES)
    got = ocibridge.load_tensors(ref, framework="torch", device=device, transfer=SMALL_PARTS)
    assert list(got) == list(want)  # in file order (safetensors writes them sorted by dtype, then name)
    assert_same(got, want)
    assert_same(ocibridge.load_tensors(ref, framework="torch", device=device), want)


def test_a_device_stages_its_bytes_through_a_bounded_ring_and_none_lands_in_place(models, monkeypatch):
    """device='cpu': the tensors are allocated on the device and every byte reaches them from a
    ring (one per request in flight; here smaller than a request, so it wraps), none straight
    off the socket; with no device no ring is used and the bytes land in the tensors."""
    ref, pulled, _ = models["table"]
    monkeypatch.setattr(tensorload, "RING", 3 * CHUNK)  # (a request is 4 chunks: every ring wraps)
    with ocibridge.iter_tensors(ref, framework="torch", device="cpu", max_bytes=None,
                                transfer=SMALL_PARTS) as stream:
        got = dict(stream)
    assert 0 < stream.staging_bytes <= SMALL_PARTS.parts_in_flight * 3 * CHUNK
    assert_same(got, in_file_order(pulled))
    with ocibridge.iter_tensors(ref, framework="torch", max_bytes=None, transfer=SMALL_PARTS) as stream:
        assert_same(dict(stream), in_file_order(pulled))
    assert stream.staging_bytes == 0


class DeferredLane:
    """A lane whose copies happen only when waited for (as a CUDA stream's might, much later):
    a ring that reused a place before its copies were done would copy the newer bytes."""

    def __init__(self, nbytes: int):
        self.buffer = bytearray(nbytes)
        self.view = memoryview(self.buffer)
        self.queued: list[tuple[int, Any, int, int]] = []
        self.done = 0
        self.most_queued = 0

    def begin(self) -> None:
        pass

    def copy(self, start: int, dst: Any, offset: int, nbytes: int) -> None:
        self.queued.append((start, dst, offset, nbytes))
        self.most_queued = max(self.most_queued, len(self.queued) - self.done)

    def mark(self) -> int:
        return len(self.queued)

    def wait(self, token: int) -> None:
        for start, dst, offset, nbytes in self.queued[self.done:token]:
            dst[offset:offset + nbytes] = self.buffer[start:start + nbytes]
        self.done = max(self.done, token)


def test_a_ring_reuses_a_place_only_once_the_copies_out_of_it_are_done():
    """The ring alone (no registry): pieces of 100 bytes and a last one of 40, through a ring of
    250 (it wraps, with 50 bytes left at its end), into three tensors and bytes of no tensor;
    copies are deferred until waited for, and every tensor still gets its own bytes."""
    from ocibridge.lazyread.devicering import Ring

    data = bytes(range(256)) * 4  # 1024 bytes: a "file"
    slots = []
    for name, start, end in (("a", 8, 300), ("b", 300, 310), ("c", 420, 1024)):
        slot = Slot("f", TensorInfo(name, "U8", (end - start,), start, end))
        slot.buffer = bytearray(end - start)
        slots.append(slot)
    landing = Landing(slots)
    lane = DeferredLane(250)
    ring = Ring(lane)
    at = 0
    while at < len(data):
        stop = min(len(data), at + 100)
        (view,) = ring.views(at, stop)
        view[:] = data[at:stop]
        ring.send(landing)
        at = stop
    assert lane.most_queued > 1  # copies were pending while later pieces arrived
    ring.drain()
    for slot in slots:
        assert bytes(slot.buffer) == data[slot.info.start:slot.info.end], slot.info.name


def test_a_tampered_chunk_on_a_device_names_the_tensor_and_hands_over_nothing_of_it(models, fault_proxy):
    _, pulled, repo = models["table"]
    layer = layer_of(f"{fault_proxy.host}/{repo}:v1", "model.safetensors")
    at = offset_of(pulled, "embed.weight") + 3 * CHUNK + 5  # inside it, past its first chunk
    fault_proxy.clear()
    fault_proxy.add("GET", f"/blobs/{layer.digest}", corrupt_at(at), times=None)
    returned = None
    with pytest.raises(ocibridge.TensorMismatch) as caught:
        returned = ocibridge.load_tensors(f"{fault_proxy.host}/{repo}:v1", framework="torch", device="cpu",
                                          transfer=SMALL_PARTS)
    assert returned is None
    assert caught.value.file == "model.safetensors" and caught.value.tensors == ("embed.weight",)
    assert "does not match its digest in the chunk table; it holds tensor(s) 'embed.weight'" in str(caught.value)
    seen = []
    with pytest.raises(ocibridge.TensorMismatch, match="embed.weight"), \
            ocibridge.iter_tensors(f"{fault_proxy.host}/{repo}:v1", framework="torch", device="cpu",
                                   transfer=SMALL_PARTS) as stream:
        for name, _ in stream:
            seen.append(name)
    assert "embed.weight" not in seen


def test_without_a_table_a_wrong_byte_fails_the_whole_file_on_a_device(models, fault_proxy):
    _, pulled, repo = models["plain"]
    layer = layer_of(f"{fault_proxy.host}/{repo}:v1", "model.safetensors")
    fault_proxy.clear()
    fault_proxy.add("GET", f"/blobs/{layer.digest}", corrupt_at(offset_of(pulled, "scale") + 1), times=None)
    seen = []
    with pytest.raises(ocibridge.TensorMismatch, match="do not match its layer digest"):
        for name, _ in ocibridge.iter_tensors(f"{fault_proxy.host}/{repo}:v1", framework="torch", device="cpu",
                                              transfer=SMALL_PARTS):
            seen.append(name)
    assert seen == []


def test_a_policy_refusing_the_model_fetches_no_blob_for_torch_either(models, fault_proxy, tmp_path):
    _, _, repo = models["table"]
    rejecting = tmp_path / "reject.json"
    rejecting.write_text(json.dumps({"default": [{"type": "reject"}]}))
    fault_proxy.clear()
    with pytest.raises(SignatureError, match="refused"):
        ocibridge.load_tensors(f"{fault_proxy.host}/{repo}:v1", framework="torch", device="cpu",
                               verify=ocibridge.verification(policy=rejecting))
    assert fault_proxy.requests_matching(None, "/blobs/") == []


@pytest.mark.parametrize(("device", "said"), [
    ("cuda", r"^device='cuda': this torch \(.+\) sees no CUDA device here; leave device out \(or device='cpu'\) "
             r"for tensors in host memory$"),
    ("cuda:1", r"^device='cuda:1': this torch \(.+\) sees no CUDA device here"),
    ("gpu", r"^device='gpu' is not a torch device: "),
])
def test_a_device_this_machine_lacks_is_one_error_line_before_any_request(models, fault_proxy, monkeypatch,
                                                                         device, said):
    # (the suite's machines have no GPU, bench.gpu_load runs on one: here torch is told it has none, wherever it runs)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    _, _, repo = models["table"]
    fault_proxy.clear()
    with pytest.raises(OcibridgeError, match=said) as caught:
        ocibridge.load_tensors(f"{fault_proxy.host}/{repo}:v1", framework="torch", device=device)
    assert "\n" not in str(caught.value)
    assert fault_proxy.requests == []
