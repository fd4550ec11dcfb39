"""One tensor of a GGUF file without the rest: the header, then that tensor's bytes.

Format (ggml's GGUF v2/v3): magic, counts, key/values, then one tensor info per tensor (name,
dims, ggml type, offset); the data section starts at the first multiple of
``general.alignment`` (32) after the infos, and a tensor's bytes are ``offset`` from there,
``elements / block * block bytes`` long. Works over any reader of verified byte ranges (a
:class:`ocibridge.lazyread.blobreader.VerifiedBlob`), so only the header's and the asked tensors'
chunks move. :func:`load_table` is the same table as a whole-model load makes it
(``lazyread.tensorload``): quantized tensors as their block bytes (``U8``, rows of bytes), as
the ``gguf`` library's reader hands them.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from ocibridge.errors import OcibridgeError
from ocibridge.lazyread.rangestream import RangeStream
from ocibridge.lazyread.tensorfile import RangeReadable, TensorFile, TensorInfo, refuse_overlaps
from ocibridge.model.ggml_types import NUMPY_TYPES, TENSOR_TYPES, TYPE_SIZES
from ocibridge.model.gguf_header import GGUFHeader, read_gguf_header

#: the header is read in pieces of this size: at most one piece past its end is read (a
#: chunk of tensor data more, at worst, which the first tensor read usually needs anyway)
_HEADER_PIECE = 64 * 1024


class GGUFError(OcibridgeError):
    """A GGUF file whose tensor table is malformed or names data outside the file."""


@dataclass(frozen=True)
class GGUFTensorInfo:
    name: str
    ggml_type: int
    type_name: str  # "F32", "Q8_0", or "type N" for a code ggml_types does not know
    shape: tuple[int, ...]  # numpy order (slowest-varying first): GGUF's dims reversed
    start: int  # absolute offsets in the file
    end: int


class RemoteGGUF(TensorFile["GGUFTensorInfo"]):
    """``keys()``, ``info(name)``, ``get_bytes(name)`` and ``get_tensor(name)`` (numpy, for
    F32/F16/I8-I64/F64; quantized blocks have no numpy type) of a GGUF file read by ranges."""

    error = GGUFError

    def __init__(self, blob: RangeReadable, name: str = "file"):
        super().__init__(blob, name)
        stream = io.BufferedReader(RangeStream(blob), buffer_size=_HEADER_PIECE)
        self.header: GGUFHeader = read_gguf_header(stream, where=name)
        self.metadata = self.header.metadata
        base = self.header.data_start
        for t in self.header.tensors:
            sizes = TYPE_SIZES.get(t.ggml_type)
            if sizes is None:
                raise GGUFError(f"{name}: tensor {t.name!r} has ggml type {t.ggml_type}, whose size "
                                "ocibridge does not know")
            block, width = sizes
            if t.elements % block:
                raise GGUFError(f"{name}: tensor {t.name!r}: {t.elements} elements is not a whole number "
                                f"of {block}-element blocks")
            start = base + t.offset
            end = start + t.elements // block * width
            if end > blob.size:
                raise GGUFError(f"{name}: tensor {t.name!r} lies outside the file (bytes {start}-{end} "
                                f"of {blob.size})")
            if t.name in self.tensors:
                raise GGUFError(f"{name}: tensor {t.name!r} is listed twice")
            type_name = TENSOR_TYPES.get(t.ggml_type, f"type {t.ggml_type}")
            self.tensors[t.name] = GGUFTensorInfo(t.name, t.ggml_type, type_name, tuple(reversed(t.dims)),
                                                  start, end)

    def get_tensor(self, key: str) -> Any:
        """The tensor as a numpy array of its shape (numpy is needed); quantized types: use
        get_bytes (their blocks have no numpy type)."""
        info = self.info(key)
        return self._array(key, NUMPY_TYPES.get(info.ggml_type), info.type_name,
                           ">" if self.header.byte_order == ">" else "<")


def load_table(blob: RangeReadable, name: str = "file") -> tuple[dict[str, TensorInfo], int]:
    """The tensors of GGUF file ``blob`` as a whole-model load makes them, in the header's
    order, and where its data section starts. F32/F16/BF16/I8-I64/F64 tensors keep their type
    and shape; quantized ones are their blocks' bytes (``U8``, each row its bytes, as the
    ``gguf`` library reads them); a big-endian file's typed tensors are refused by the
    framework (their names say so) before any of their bytes moves."""
    gguf = RemoteGGUF(blob, name)
    big_endian = gguf.header.byte_order == ">"
    table = {}
    for key, info in gguf.tensors.items():
        dtype, shape = info.type_name, info.shape
        if info.ggml_type not in NUMPY_TYPES and info.type_name != "BF16":
            block, width = TYPE_SIZES[info.ggml_type]
            if shape and shape[-1] % block:
                raise GGUFError(f"{name}: tensor {key!r}: rows of {shape[-1]} elements are not whole "
                                f"{block}-element blocks")
            dtype, shape = "U8", (*shape[:-1], shape[-1] // block * width) if shape else (info.end - info.start,)
        elif big_endian and dtype not in ("I8", "U8"):
            dtype = f"{dtype} (big-endian)"
        table[key] = TensorInfo(key, dtype, shape, info.start, info.end)
    refuse_overlaps(name, table.values(), GGUFError)  # (each tensor lands in memory of its own)
    return table, gguf.header.data_start
