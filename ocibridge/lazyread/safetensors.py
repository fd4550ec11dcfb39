"""One tensor of a safetensors file without the rest: the header, then that tensor's bytes.

Format (huggingface/safetensors): an 8-byte little-endian header length N, N bytes of JSON
(``name -> {dtype, shape, data_offsets: [begin, end]}``, offsets from byte 8 + N), the data.
"""

from __future__ import annotations

import math
import struct
from typing import TYPE_CHECKING, Any

from ocibridge.core import boundedjson
from ocibridge.errors import OcibridgeError
from ocibridge.lazyread.tensorfile import RangeReadable, TensorFile, TensorInfo, refuse_overlaps

if TYPE_CHECKING:  # (the reader of lazy reads; a whole-model load reads headers without it)
    from ocibridge.lazyread.blobreader import VerifiedBlob

#: the safetensors library's own cap on the header
MAX_HEADER = 100 * 1024 * 1024
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
               "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
#: numpy's name of each safetensors dtype it has (none for BF16 and the F8 types)
NUMPY_TYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "F16": "float16",
          "I32": "int32", "U32": "uint32", "F32": "float32", "I64": "int64", "U64": "uint64", "F64": "float64"}


class SafetensorsError(OcibridgeError):
    """A safetensors header that is malformed or names data outside the file."""


class RemoteSafetensors(TensorFile["TensorInfo"]):
    """``keys()``, ``info(name)``, ``get_bytes(name)`` and ``get_tensor(name)`` (numpy) of a file
    read through a :class:`VerifiedBlob`: only the header's and the asked tensors' chunks move."""

    error = SafetensorsError

    def __init__(self, blob: VerifiedBlob, name: str = "file"):
        super().__init__(blob, name)
        self.metadata, self.tensors = read_header(blob, name)

    def get_tensor(self, key: str) -> Any:
        """The tensor as a numpy array (numpy is needed; bf16/fp8 have no numpy type)."""
        info = self.info(key)
        return self._array(key, NUMPY_TYPES.get(info.dtype), info.dtype)


def read_header(blob: RangeReadable, name: str = "file") -> tuple[dict[str, Any], dict[str, TensorInfo]]:
    """The ``__metadata__`` and the tensors (in the header's order) of the safetensors file
    ``blob``, each tensor checked to lie in the file, with as many bytes as its dtype and shape
    say, and to share no byte with another: what a reader of any part of the file relies on."""
    if blob.size < 8:
        raise SafetensorsError(f"{name}: {blob.size} bytes is too short for a safetensors file")
    (length,) = struct.unpack("<Q", blob.read(0, 8))
    if length > min(MAX_HEADER, blob.size - 8):
        raise SafetensorsError(f"{name}: header length {length} is past the file or over {MAX_HEADER}")
    try:
        header = boundedjson.loads(blob.read(8, 8 + length), "JSON")
        if not isinstance(header, dict):
            raise ValueError("not an object")
    except (ValueError, UnicodeDecodeError) as e:
        raise SafetensorsError(f"{name}: bad safetensors header: {e}") from None
    base = 8 + length
    meta = header.pop("__metadata__", None)
    tensors = {key: _info(name, key, item, base, blob.size) for key, item in header.items()}
    refuse_overlaps(name, tensors.values(), SafetensorsError)
    return (meta if isinstance(meta, dict) else {}), tensors


def _info(name: str, key: str, item: object, base: int, size: int) -> TensorInfo:
    """One entry, read as the safetensors library reads it: a JSON ``true`` is no size there."""
    bad = SafetensorsError(f"{name}: tensor {key!r}: malformed header entry")
    if not isinstance(item, dict):
        raise bad
    dtype, shape, offsets = item.get("dtype"), item.get("shape"), item.get("data_offsets")
    if not isinstance(dtype, str) or not isinstance(shape, list) or not isinstance(offsets, list) \
            or len(offsets) != 2 or not all(type(d) is int and d >= 0 for d in [*shape, *offsets]):
        raise bad
    begin, end = offsets
    if begin > end or base + end > size:
        raise SafetensorsError(f"{name}: tensor {key!r} lies outside the file's data")
    width = DTYPE_BYTES.get(dtype)
    if width is not None and math.prod(shape) * width != end - begin:
        raise SafetensorsError(f"{name}: tensor {key!r}: {end - begin} bytes for {dtype}{shape}")
    return TensorInfo(key, dtype, tuple(shape), base + begin, base + end)
