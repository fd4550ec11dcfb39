"""The header of a GGUF file, read from a stream: architecture, parameter count, file type, and
the tensor-info table (name, dims, ggml type, offset) that lazy reads of tensor data need.

Reads only the key/value section and the tensor infos, never the tensor data, so it works on
a blob streaming from a registry as well as on a local file. Type names come from ggml's
tables, copied in ggml_types (never the optional ``gguf`` package, see docs/reproducibility.md);
the parser is a small streaming one because ``gguf.GGUFReader`` needs a whole local file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ocibridge.errors import SourceError, TooLarge
from ocibridge.model.ggml_types import FILE_TYPES, GGUF_MAGIC, TENSOR_TYPES

MAX_HEADER_BYTES = 1 << 30  # tokenizer arrays make headers large, but not this large
MAX_COUNT = 1 << 24
MAX_KEY = 1 << 16
#: Values decoded in one header (items of string arrays, tensor infos): a tokenizer of 262K tokens
#: and ~500K merges is ~1M; this bounds the CPU an array of empty arrays could ask for (~5 s).
MAX_VALUES = 1 << 21
#: Key/value pairs and tensor infos in one header: real files hold ~50 keys and a few thousand
#: tensors; each costs a decode in Python, so these bound the header's CPU time.
MAX_KEYS = 1 << 16
MAX_TENSORS = 1 << 16
#: Arrays of arrays nest at most this deep (real headers: 1).
MAX_ARRAY_DEPTH = 4
#: Element counts (a dimension, a tensor, the total) stay below 2^63, as ggml's int64 counts do.
MAX_ELEMENTS = 1 << 63
KEEP_STRING = 1 << 16  # longer string values are skipped, not kept
_SKIP_CHUNK = 1 << 20
_READ_AHEAD = 1 << 16
#: Items of arrays inside arrays (never written by llama.cpp): each costs a full value decode.
MAX_NESTED_ITEMS = 1 << 16

#: GGUFValueType → struct format of fixed-size scalars.
_SCALARS = {
    0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d",
}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class GGUFTensor:
    """One entry of the tensor-info table: where its data lies, relative to the data section."""

    name: str
    dims: tuple[int, ...]  # as GGUF stores them: fastest-varying first (ggml's ne[])
    ggml_type: int
    offset: int  # from the start of the data section

    @property
    def elements(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n


#: the data section starts at the first multiple of this after the header (``general.alignment``)
DEFAULT_ALIGNMENT = 32


@dataclass
class GGUFHeader:
    version: int
    metadata: dict[str, Any] = field(default_factory=dict)  # scalars and short strings only
    tensor_count: int = 0
    parameter_count: int = 0
    tensor_types: dict[int, int] = field(default_factory=dict)  # ggml type → element count
    tensors: list[GGUFTensor] = field(default_factory=list)  # the tensor-info table, in file order
    header_size: int = 0  # bytes of magic, counts, key/values and tensor infos
    byte_order: str = "<"  # ">" for a big-endian file: its tensor data is big-endian too

    @property
    def alignment(self) -> int:
        value = self.metadata.get("general.alignment")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0 and value % 8 == 0:
            return value
        return DEFAULT_ALIGNMENT

    @property
    def data_start(self) -> int:
        """Where the data section (the tensors' bytes) starts in the file."""
        return -(-self.header_size // self.alignment) * self.alignment

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
    if n >= 10**300:  # no float holds it; a real count never comes close
        return "unknown"
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= scale:
            value = n / scale
            text = f"{value:.0f}" if value >= 100 else f"{value:.1f}".removesuffix(".0")
            return text + unit
    return str(n)


class _Stream:
    """Exact reads with a budget, so a hostile header cannot make us read forever. The strings of
    an array are read ahead (only as many bytes as their lengths alone must take), so that a
    tokenizer's many small strings cost a slice each, not a read call each."""

    def __init__(self, raw: BinaryIO, where: str):
        self.raw = raw
        self.where = where
        self.pos = 0
        self.endian = "<"
        self.values = 0
        self.nested = 0
        self._buf = b""
        self._off = 0

    def spend(self, n: int = 1) -> None:
        """Count ``n`` values decoded, refusing a header that asks for more than MAX_VALUES."""
        self.values += n
        if self.values > MAX_VALUES:
            raise SourceError(f"{self.where}: GGUF header holds more than {MAX_VALUES} values")

    def take(self, n: int) -> bytes:
        if self.pos + n > MAX_HEADER_BYTES:
            raise TooLarge(f"{self.where}: GGUF header larger than {MAX_HEADER_BYTES} bytes")
        end = self._off + n
        if end <= len(self._buf):  # the common case: a field already read ahead
            data = self._buf[self._off:end]
            self._off = end
            self.pos += n
            return data
        parts, left = [self._buf[self._off:]], n - (len(self._buf) - self._off)
        self._buf, self._off = b"", 0
        while left:
            chunk = self.raw.read(min(left, _SKIP_CHUNK))
            if not chunk:
                raise SourceError(f"{self.where}: truncated GGUF header")
            parts.append(chunk)
            left -= len(chunk)
        self.pos += n
        return b"".join(parts)

    def _read_ahead(self, n: int) -> None:
        """Buffer up to ``n`` more bytes, ``n`` being bytes the header certainly still holds (so
        no byte of tensor data is ever read)."""
        rest = self._buf[self._off:]
        more = self.raw.read(n) if n > 0 else b""
        self._buf, self._off = rest + more, 0

    def skip_strings(self, n: int) -> None:
        """Skip ``n`` length-prefixed strings (a tokenizer's vocabulary): the fast path parses
        lengths straight from the read-ahead buffer, the slow one is :meth:`skip`."""
        fmt = self.endian + "Q"
        while n:
            buf, off = self._buf, self._off
            if off + 8 > len(buf):  # every string left has its 8-byte length: that much is header
                self._read_ahead(min(_READ_AHEAD, 8 * n) - (len(buf) - off))
                if self._off + 8 > len(self._buf):
                    raise SourceError(f"{self.where}: truncated GGUF header")
                buf, off = self._buf, self._off
            (length,) = struct.unpack_from(fmt, buf, off)
            if off + 8 + length > len(buf) or self.pos + 8 + length > MAX_HEADER_BYTES:
                self.skip(self.string_length())
                n -= 1
                continue
            self._off = off + 8 + length
            self.pos += 8 + length
            n -= 1

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


def _value(s: _Stream, vtype: int, keep: bool, depth: int = 0) -> Any:
    s.spend()
    if vtype in _SCALARS:
        return s.unpack(_SCALARS[vtype])
    if vtype == _STRING:
        n = s.string_length()
        if keep and n <= KEEP_STRING:
            return s.take(n).decode("utf-8", errors="replace")
        s.skip(n)
        return None
    if vtype == _ARRAY:
        if depth >= MAX_ARRAY_DEPTH:
            raise TooLarge(f"{s.where}: GGUF arrays nested more than {MAX_ARRAY_DEPTH} deep")
        etype = s.unpack("I")
        n = s.count("array")
        if etype in _SCALARS:
            s.skip(n * struct.calcsize(_SCALARS[etype]))
        elif etype == _STRING:
            s.spend(n)
            s.skip_strings(n)
        else:
            s.nested += n
            if s.nested > MAX_NESTED_ITEMS:
                raise SourceError(f"{s.where}: GGUF arrays of arrays hold more than {MAX_NESTED_ITEMS} items")
            for _ in range(n):
                _value(s, etype, keep=False, depth=depth + 1)
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
    if header.tensor_count > MAX_TENSORS or kv_count > MAX_KEYS:
        raise SourceError(f"{where}: GGUF header with {header.tensor_count} tensors and {kv_count} keys "
                          f"is implausible (at most {MAX_TENSORS} and {MAX_KEYS})")
    for _ in range(kv_count):
        n = s.string_length()
        if n > MAX_KEY:
            raise SourceError(f"{where}: GGUF key of {n} bytes is implausible")
        key = s.take(n).decode("utf-8", errors="replace")
        value = _value(s, s.unpack("I"), keep=True)
        if value is not None:
            header.metadata[key] = value
    for _ in range(header.tensor_count):
        s.spend()
        name_length = s.string_length()
        if name_length > MAX_KEY:
            raise SourceError(f"{where}: GGUF tensor name of {name_length} bytes is implausible")
        name = s.take(name_length).decode("utf-8", errors="replace")
        n_dims = s.unpack("I")
        if n_dims > 8:
            raise SourceError(f"{where}: GGUF tensor with {n_dims} dimensions is implausible")
        dims = tuple(int(s.unpack("Q")) for _ in range(n_dims))
        elements = 1
        for d in dims:
            elements *= d  # each < 2^64, at most 8: a bounded integer
        ggml_type = s.unpack("I")
        header.tensors.append(GGUFTensor(name, dims, ggml_type, int(s.unpack("Q"))))
        if elements >= MAX_ELEMENTS or header.parameter_count + elements >= MAX_ELEMENTS:
            raise SourceError(f"{where}: GGUF tensor counts beyond 2^63 elements are implausible")
        header.parameter_count += elements
        header.tensor_types[ggml_type] = header.tensor_types.get(ggml_type, 0) + elements
    header.header_size = s.pos
    header.byte_order = s.endian
    return header
