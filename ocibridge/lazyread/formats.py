"""Which tensor formats a whole-model load reads, and each one's table: the tensors of a file
(``TensorInfo``: dtype, shape, where its bytes lie) and where its data starts, read from the
file's first verified bytes. Told apart by the GGUF magic, as ``open_tensors`` tells them."""

from __future__ import annotations

import struct

from ocibridge.lazyread.safetensors import read_header
from ocibridge.lazyread.tensorfile import RangeReadable, TensorInfo
from ocibridge.model.ggml_types import GGUF_MAGIC

#: the files a load reads, by how their names end
SUFFIXES = (".safetensors", ".gguf")


def is_gguf(blob: RangeReadable) -> bool:
    return blob.size >= 4 and blob.read(0, 4) == GGUF_MAGIC


def read_table(blob: RangeReadable, name: str) -> tuple[dict[str, TensorInfo], int]:
    """The tensors of ``blob`` (safetensors or GGUF) in the header's order, and the offset
    where the header ends (the bytes after it are tensors' or padding)."""
    if is_gguf(blob):
        from ocibridge.lazyread import gguf  # (its header reader: only for a GGUF file)

        return gguf.load_table(blob, name)
    _, tensors = read_header(blob, name)
    (length,) = struct.unpack("<Q", blob.read(0, 8))
    return tensors, 8 + length
