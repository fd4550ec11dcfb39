"""What every tensor file read by byte ranges answers, whatever its format (safetensors, GGUF):
the tensors' names, where each lies in the file, and its verified bytes. The formats differ
only in how their header is read; the lookups and reads are these."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

from ocibridge.errors import OcibridgeError


class RangeReadable(Protocol):
    """Verified bytes ``[start, end)`` of one file."""

    @property
    def size(self) -> int: ...

    def read(self, start: int = 0, end: int | None = None) -> bytes: ...


class TensorSpan(Protocol):
    """Where one tensor's data lies: absolute offsets in the file."""

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...

    @property
    def shape(self) -> tuple[int, ...]: ...


Info = TypeVar("Info", bound=TensorSpan)


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One tensor as a whole-model load makes it, whatever the format: ``dtype`` in
    safetensors' names (``F32``, ``BF16``, ``U8``...), ``shape`` in numpy order, and where its
    bytes lie (absolute offsets in the file)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int


def refuse_overlaps(name: str, infos: Iterable[TensorInfo], error: type[OcibridgeError]) -> None:
    """Two tensors sharing bytes (as the safetensors library refuses them): a diff, a read or a
    load of one would otherwise answer for bytes that are also another's."""
    previous: TensorInfo | None = None
    for info in sorted((i for i in infos if i.end > i.start), key=lambda i: i.start):
        if previous is not None and info.start < previous.end:
            raise error(f"{name}: tensors {previous.name!r} and {info.name!r} overlap "
                        f"(bytes {info.start}-{previous.end} are in both)")
        previous = info


class TensorFile(Generic[Info]):
    """``keys()``, ``info(name)`` and ``get_bytes(name)``; a format fills ``tensors`` from its header."""

    #: the format's error type, raised for a name the file does not hold
    error: ClassVar[type[OcibridgeError]] = OcibridgeError

    def __init__(self, blob: RangeReadable, name: str):
        self.blob = blob
        self.name = name
        self.tensors: dict[str, Info] = {}

    def keys(self) -> list[str]:
        return list(self.tensors)

    def info(self, key: str) -> Info:
        try:
            return self.tensors[key]
        except KeyError:
            raise self.error(f"{self.name}: no tensor {key!r}") from None

    def get_bytes(self, key: str) -> bytes:
        info = self.info(key)
        return self.blob.read(info.start, info.end)

    def _array(self, key: str, numpy_type: str | None, type_name: str,
               byte_order: Literal["<", ">"] = "<") -> Any:
        """The tensor as a numpy array of its shape, numpy's ``numpy_type`` in ``byte_order``;
        None: a type numpy has none for (bf16, fp8, quantized blocks), to be read as bytes."""
        info = self.info(key)
        try:
            import numpy
        except ImportError:
            raise OcibridgeError("get_tensor needs numpy: pip install 'ocibridge[tensors]' "
                                 "(get_bytes does not)") from None
        if numpy_type is None:
            raise self.error(f"{self.name}: {key} is {type_name}, which numpy has no type for: use get_bytes")
        dtype = numpy.dtype(numpy_type).newbyteorder(byte_order)
        return numpy.frombuffer(self.get_bytes(key), dtype=dtype).reshape(info.shape)
