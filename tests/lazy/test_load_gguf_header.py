"""A whole-model load reads a long GGUF header (a tokenizer's strings: real files hold ~10 MiB of
them, the header reader takes up to 1 GiB) a piece at a time into one growing prefix: each piece
must not copy all the pieces before it again, or a 256 MiB header cost ~20 s of CPU in copies."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy
import pytest
from support.fixtures import new_repo

import ocibridge
from ocibridge.lazyread import headerprefix

CHUNK = 64 * 1024
HEADER = 8 * 1024 * 1024  # of tokenizer strings: 128 chunks


def write_gguf(path: Path) -> numpy.ndarray:
    tensor = numpy.arange(256, dtype=numpy.float32)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_array("tokenizer.ggml.tokens", ["x" * 1016] * (HEADER // 1024))  # 1 KiB each, length included
    writer.add_tensor("t", tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tensor


@pytest.fixture(scope="module")
def long_header(registry, tmp_path_factory):
    src = tmp_path_factory.mktemp("gguf-header") / "model"
    src.mkdir()
    tensor = write_gguf(src / "model.gguf")
    ref = f"{registry.host}/{new_repo()}:v1"
    ocibridge.push(str(src), ref, options=ocibridge.PushOptions(chunk_threshold=1, chunk_size=CHUNK))
    return ref, tensor, (src / "model.gguf").stat().st_size


def test_a_long_gguf_header_is_received_into_room_that_doubles(long_header, monkeypatch):
    ref, tensor, size = long_header
    allocated: list[int] = []

    class Counted(bytearray):
        def __init__(self, *args: object) -> None:
            super().__init__(*args)  # type: ignore[arg-type]
            allocated.append(len(self))

    monkeypatch.setattr(headerprefix, "bytearray", Counted, raising=False)  # the prefix's room, as it grows
    got = ocibridge.load_tensors(ref, files="*.gguf", warn=None)
    assert got["t"].tobytes() == tensor.tobytes()
    # room grown a chunk at a time: 128 rooms, ~520 MiB in all; doubling: ~3 times the file
    assert sum(allocated) <= 4 * size, (len(allocated), sum(allocated), size)
