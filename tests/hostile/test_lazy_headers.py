"""A safetensors header read lazily (``load_tensors``, ``open_tensors``, a mount's readers) is
read as the safetensors library reads it: what the library refuses is refused here, with one
error, before a tensor's byte moves."""

from __future__ import annotations

import json
import struct

import pytest

from ocibridge.lazyread.safetensors import SafetensorsError, read_header


class Blob:
    """A file's bytes as a reader of verified ranges hands them over."""

    def __init__(self, data: bytes):
        self.data = data
        self.size = len(data)

    def read(self, start: int = 0, end: int | None = None) -> bytes:
        return self.data[start:end]


def safetensors(entry: dict[str, object], data: bytes) -> Blob:
    text = json.dumps({"t": entry}).encode()
    text += b" " * (-len(text) % 8)
    return Blob(struct.pack("<Q", len(text)) + text + data)


@pytest.mark.parametrize("entry", [
    {"dtype": "F32", "shape": [True, 2], "data_offsets": [0, 8]},  # true is no 1: shape (1, 2) on main
    {"dtype": "U8", "shape": [], "data_offsets": [False, True]},  # nor are false and true offsets
])
def test_a_boolean_size_or_offset_is_refused_as_the_library_refuses_it(entry):
    with pytest.raises(SafetensorsError, match="'t': malformed header entry"):
        read_header(safetensors(entry, bytes(8)), "model.safetensors")


def test_the_same_entry_with_numbers_is_read():
    _, tensors = read_header(safetensors({"dtype": "F32", "shape": [1, 2], "data_offsets": [0, 8]}, bytes(8)))
    assert tensors["t"].shape == (1, 2) and tensors["t"].end - tensors["t"].start == 8
