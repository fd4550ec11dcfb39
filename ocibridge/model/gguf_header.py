"""The header of a GGUF file, read from a stream: architecture, parameter count, file type.

Reads only the key/value section and the tensor infos, never the tensor data, so it works on
a blob streaming from a registry as well as on a local file. Type names come from ggml's
tables, copied in ggml_types (never the optional ``gguf`` package, see docs/reproducibility.md);
the parser is a small streaming one because ``gguf.GGUFReader`` needs a whole local file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ocibridge.errors import SourceError
from ocibridge.model.ggml_types import FILE_TYPES, TENSOR_TYPES

GGUF_MAGIC = b"GGUF"
MAX_HEADER_BYTES = 1 << 30  # tokenizer arrays make headers large, but not this large
MAX_COUNT = 1 << 24
MAX_KEY = 1 << 16
KEEP_STRING = 1 << 16  # longer string values are skipped, not kept
_SKIP_CHUNK = 1 << 20

#: GGUFValueType → struct format of fixed-size scalars.
_SCALARS = {
    0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d",
}
_STRING, _ARRAY = 8, 9


@dataclass
class GGUFHeader:
    version: int
    metadata: dict[str, Any] = field(default_factory=dict)  # scalars and short strings only
    tensor_count: int = 0
    parameter_count: int = 0
    tensor_types: dict[int, int] = field(default_factory=dict)  # ggml type → element count

    @property
    def architecture(self) -> str | None:
        value = self.metadata.get("general.architecture")
        return value if isinstance(value, str) and value else None

    @property
    def param_size(self) -> str | None:
        """``general.size_label`` if present (``8B``, ``8x7B``), else from the tensor counts."""
        label = self.metadata.get("general.size_label")
        if isinstance(label, str) and label.strip():
            return label.strip()
        return format_param_count(self.parameter_count) if self.parameter_count else None

    @property
    def quantization(self) -> str | None:
        """The file type name (``Q4_K_M``, ``F16``), else the dominant tensor type. Names come from
        ocibridge's own copy of ggml's tables, never an optional package, so a config is the same
        whatever is installed."""
        file_type = self.metadata.get("general.file_type")
        if isinstance(file_type, int) and not isinstance(file_type, bool) and file_type in FILE_TYPES:
            return FILE_TYPES[file_type]
        if self.tensor_types:
            dominant = max(self.tensor_types.items(), key=lambda kv: kv[1])[0]
            return TENSOR_TYPES.get(dominant)
        return None


def format_param_count(n: int) -> str:
    """``8030261248`` → ``8B``, ``134515008`` → ``135M``, ``1543714304`` → ``1.5B``."""
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= scale:
            value = n / scale
            text = f"{value:.0f}" if value >= 100 else f"{value:.1f}".removesuffix(".0")
            return text + unit
    return str(n)


class _Stream:
    """Exact reads with a budget, so a hostile header cannot make us read forever."""

    def __init__(self, raw: BinaryIO, where: str):
        self.raw = raw
        self.where = where
        self.pos = 0
        self.endian = "<"

    def take(self, n: int) -> bytes:
        if self.pos + n > MAX_HEADER_BYTES:
            raise SourceError(f"{self.where}: GGUF header larger than {MAX_HEADER_BYTES} bytes")
        parts, left = [], n
        while left:
            chunk = self.raw.read(min(left, _SKIP_CHUNK))
            if not chunk:
                raise SourceError(f"{self.where}: truncated GGUF header")
            parts.append(chunk)
            left -= len(chunk)
        self.pos += n
        return b"".join(parts)

    def skip(self, n: int) -> None:
        while n:
            step = min(n, _SKIP_CHUNK)
            self.take(step)
            n -= step

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(self.endian + fmt, self.take(struct.calcsize(fmt)))[0]

    def count(self, what: str) -> int:
        n = int(self.unpack("Q"))
        if n > MAX_COUNT:
            raise SourceError(f"{self.where}: GGUF {what} count {n} is implausible")
        return n

    def string_length(self) -> int:
        n = int(self.unpack("Q"))
        if n > MAX_HEADER_BYTES:
            raise SourceError(f"{self.where}: GGUF string of {n} bytes is implausible")
        return n


def _value(s: _Stream, vtype: int, keep: bool) -> Any:
    if vtype in _SCALARS:
        return s.unpack(_SCALARS[vtype])
    if vtype == _STRING:
        n = s.string_length()
        if keep and n <= KEEP_STRING:
            return s.take(n).decode("utf-8", errors="replace")
        s.skip(n)
        return None
    if vtype == _ARRAY:
        etype = s.unpack("I")
        n = s.count("array")
        if etype in _SCALARS:
            s.skip(n * struct.calcsize(_SCALARS[etype]))
        else:
            for _ in range(n):
                _value(s, etype, keep=False)
        return None
    raise SourceError(f"{s.where}: unknown GGUF value type {vtype}")


def read_gguf_header(raw: BinaryIO, where: str = "GGUF file") -> GGUFHeader:
    """Parse the header of a GGUF v2/v3 stream; raises SourceError on anything else."""
    s = _Stream(raw, where)
    if s.take(4) != GGUF_MAGIC:
        raise SourceError(f"{where}: not a GGUF file (bad magic)")
    version_bytes = s.take(4)
    version = struct.unpack("<I", version_bytes)[0]
    if version & 0xFFFF == 0:  # a big-endian file
        s.endian = ">"
        version = struct.unpack(">I", version_bytes)[0]
    if version not in (2, 3):
        raise SourceError(f"{where}: unsupported GGUF version {version}")
    header = GGUFHeader(version=version)
    header.tensor_count = s.count("tensor")
    kv_count = s.count("key/value")
    for _ in range(kv_count):
        n = s.string_length()
        if n > MAX_KEY:
            raise SourceError(f"{where}: GGUF key of {n} bytes is implausible")
        key = s.take(n).decode("utf-8", errors="replace")
        value = _value(s, s.unpack("I"), keep=True)
        if value is not None:
            header.metadata[key] = value
    for _ in range(header.tensor_count):
        s.skip(s.string_length())
        n_dims = s.unpack("I")
        if n_dims > 8:
            raise SourceError(f"{where}: GGUF tensor with {n_dims} dimensions is implausible")
        elements = 1
        for _ in range(n_dims):
            elements *= s.unpack("Q")
        ggml_type = s.unpack("I")
        s.skip(8)  # data offset
        header.parameter_count += elements
        header.tensor_types[ggml_type] = header.tensor_types.get(ggml_type, 0) + elements
    return header
