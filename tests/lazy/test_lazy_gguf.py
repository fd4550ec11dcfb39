"""GGUF tensor data read lazily from a real registry (issue 29): the header, then only the chunks
of the asked tensor, every byte verified; the bytes are what llama.cpp's ``gguf`` library reads
from the whole file."""

from __future__ import annotations

import struct
from pathlib import Path

import gguf
import numpy
import pytest
from support.faultproxy import corrupt, corrupt_at
from support.fixtures import new_repo

import ocibridge
from ocibridge.api.lazy_ops import open_tensors
from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE
from ocibridge.errors import DigestMismatch
from ocibridge.lazyread.gguf import GGUFError, RemoteGGUF, load_table

BIG = 40 * 1024 * 1024  # bytes of the big F32 tensor: the file is chunked (over 16 MiB)


def write_gguf(path: Path) -> None:
    """With the real writer: a big F32 tensor first, then small F16, Q8_0 and I32 ones."""
    rng = numpy.random.default_rng(29)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_custom_alignment(64)
    writer.add_tensor("big.weight", rng.standard_normal(BIG // 4, dtype=numpy.float32).reshape(-1, 1024))
    writer.add_tensor("small.weight", rng.standard_normal((8, 64)).astype(numpy.float16))
    q8 = rng.integers(0, 256, size=(4, 34 * 8), dtype=numpy.uint8)  # 4 rows of 8 Q8_0 blocks
    writer.add_tensor("q.weight", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("ids", numpy.arange(100, dtype=numpy.int32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def gguf_model(registry, tmp_path_factory):
    src = tmp_path_factory.mktemp("gguf") / "model"
    src.mkdir()
    file = src / "model.gguf"
    write_gguf(file)
    repo = new_repo()
    ocibridge.push(str(src), f"{registry.host}/{repo}:v1", options=ocibridge.PushOptions(chunk_threshold=16 << 20))
    return repo, file


def _blob_bytes(proxy) -> int:
    return sum(r.response_bytes for r in proxy.requests_matching("GET", "/blobs/"))


def test_one_gguf_tensor_moves_two_chunks_and_equals_the_gguf_library(gguf_model, fault_proxy):
    repo, file = gguf_model
    real = {t.name: t for t in gguf.GGUFReader(str(file)).tensors}
    tensors = open_tensors(f"{fault_proxy.host}/{repo}:v1", "model.gguf", warn=None)
    try:
        assert isinstance(tensors, RemoteGGUF)
        assert sorted(tensors.keys()) == sorted(real)
        got = tensors.get_tensor("small.weight")
        expected = real["small.weight"].data
        assert got.dtype == expected.dtype and got.shape == expected.shape == (8, 64)
        assert got.tobytes() == expected.tobytes()
        # header chunk + the tensor's chunk (+ at most one read past the header's end)
        moved = _blob_bytes(fault_proxy)
        assert 0 < moved <= 3 * DEFAULT_CHUNK_SIZE, moved
        assert moved < file.stat().st_size // 10
        # every type, including quantized blocks (bytes) and a tensor across chunk boundaries
        for name, t in real.items():
            info = tensors.info(name)
            assert info.start == t.data_offset and info.end - info.start == t.n_bytes
            assert tensors.get_bytes(name) == t.data.tobytes(), name
        assert tensors.info("q.weight").type_name == "Q8_0" and tensors.info("q.weight").shape == (4, 256)
        assert (tensors.get_tensor("ids") == numpy.arange(100, dtype=numpy.int32)).all()
        with pytest.raises(GGUFError, match="Q8_0, which numpy has no type for"):
            tensors.get_tensor("q.weight")
    finally:
        tensors.blob.close()


def test_a_tampered_chunk_of_a_gguf_tensor_returns_nothing(gguf_model, fault_proxy):
    repo, file = gguf_model
    real = {t.name: t for t in gguf.GGUFReader(str(file)).tensors}
    tensors = open_tensors(f"{fault_proxy.host}/{repo}:v1", "model.gguf", warn=None)
    try:
        layer = tensors.blob.layer  # type: ignore[attr-defined]
        fault_proxy.add("GET", f"/blobs/{layer.digest}", corrupt(offset=10))
        chunk = real["small.weight"].data_offset // DEFAULT_CHUNK_SIZE
        with pytest.raises(DigestMismatch, match=f"chunk {chunk} of .* does not match"):
            tensors.get_bytes("small.weight")
    finally:
        tensors.blob.close()


def test_load_tensors_of_a_gguf_model_equals_the_gguf_library(gguf_model, registry):
    """The whole-model load reads GGUF files through the same verified engine as safetensors:
    every tensor in file order, typed ones as their type and shape, quantized ones as their
    blocks' bytes (rows of bytes), as llama.cpp's reader hands them; torch's too."""
    repo, file = gguf_model
    real = {t.name: t for t in gguf.GGUFReader(str(file)).tensors}
    got = ocibridge.load_tensors(f"{registry.host}/{repo}:v1", warn=None)
    assert list(got) == sorted(real, key=lambda n: real[n].data_offset)
    for name, t in real.items():
        expected = numpy.asarray(t.data)
        assert got[name].dtype == expected.dtype and got[name].shape == expected.shape, name
        assert got[name].tobytes() == expected.tobytes(), name
    assert got["q.weight"].dtype == numpy.uint8 and got["q.weight"].shape == (4, 8 * 34)
    torch_got = ocibridge.load_tensors(f"{registry.host}/{repo}:v1", framework="torch", files="*.gguf", warn=None)
    assert all(torch_got[n].numpy().tobytes() == got[n].tobytes() for n in real)
    assert str(torch_got["small.weight"].dtype) == "torch.float16"


def test_a_tampered_chunk_of_a_gguf_model_fails_its_load_naming_the_tensor(gguf_model, fault_proxy):
    repo, file = gguf_model
    real = {t.name: t for t in gguf.GGUFReader(str(file)).tensors}
    at = real["big.weight"].data_offset + 5 * DEFAULT_CHUNK_SIZE + 7  # inside it, past its first chunk
    tensors = open_tensors(f"{fault_proxy.host}/{repo}:v1", "model.gguf", warn=None)
    layer = tensors.blob.layer  # type: ignore[attr-defined]
    tensors.blob.close()
    fault_proxy.clear()
    fault_proxy.add("GET", f"/blobs/{layer.digest}", corrupt_at(at), times=None)
    returned = None
    with pytest.raises(ocibridge.TensorMismatch) as caught:
        returned = ocibridge.load_tensors(f"{fault_proxy.host}/{repo}:v1", warn=None)
    assert returned is None
    assert caught.value.file == "model.gguf" and caught.value.tensors == ("big.weight",)
    assert f"chunk {at // DEFAULT_CHUNK_SIZE} (bytes" in str(caught.value)


def test_a_gguf_model_quantized_rows_of_part_blocks_are_refused_by_the_load_table():
    with pytest.raises(GGUFError, match="rows of 48 elements are not whole 32-element blocks"):
        load_table(_Bytes(_gguf([("w", [48, 2], 8, 0)])), "bad.gguf")
    table, start = load_table(_Bytes(_gguf([("w", [64, 2], 8, 0), ("v", [3], 0, 160)])), "ok.gguf")
    assert table["w"].dtype == "U8" and table["w"].shape == (2, 68) and start % 32 == 0
    assert table["v"].dtype == "F32" and table["v"].shape == (3,)
    with pytest.raises(GGUFError, match="'w' and 'v' overlap"):
        load_table(_Bytes(_gguf([("w", [64, 2], 8, 0), ("v", [3], 0, 100)])), "bad.gguf")


class _Bytes:
    """A reader of ranges of bytes in memory: the parser's checks need no registry."""

    def __init__(self, data: bytes):
        self.data = data

    @property
    def size(self) -> int:
        return len(self.data)

    def read(self, start: int = 0, end: int | None = None) -> bytes:
        return self.data[start:end]


def _gguf(tensors: list[tuple[str, list[int], int, int]], pad: int = 4096) -> bytes:
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 0)
    for name, dims, ggml_type, offset in tensors:
        out += struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ggml_type, offset)
    return out + b"\0" * pad


def test_gguf_tensor_tables_that_name_data_outside_the_file_are_refused():
    with pytest.raises(GGUFError, match="'w' lies outside the file"):
        RemoteGGUF(_Bytes(_gguf([("w", [1024, 1024], 0, 0)])), "bad.gguf")
    with pytest.raises(GGUFError, match="ggml type 99"):
        RemoteGGUF(_Bytes(_gguf([("w", [4], 99, 0)])), "bad.gguf")
    with pytest.raises(GGUFError, match="not a whole number of 32-element blocks"):
        RemoteGGUF(_Bytes(_gguf([("w", [33], 8, 0)])), "bad.gguf")
    with pytest.raises(GGUFError, match="listed twice"):
        RemoteGGUF(_Bytes(_gguf([("w", [4], 0, 0), ("w", [4], 0, 16)])), "bad.gguf")
    ok = RemoteGGUF(_Bytes(_gguf([("w", [2, 3], 0, 32)])), "ok.gguf")
    assert ok.info("w").shape == (3, 2) and ok.info("w").start == ok.header.data_start + 32
    assert ok.header.data_start % 32 == 0 and ok.info("w").end - ok.info("w").start == 24
