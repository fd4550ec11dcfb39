"""What a whole-model load makes of each tensor: the memory its bytes land in, and the array
that is a view of that memory (numpy's, or torch's when asked and installed). Tensors for a
``device`` are torch's too, made in ``lazyread.torchdevice`` (their bytes pass a staging ring).

Each tensor gets a buffer of its own, allocated without being written first (an anonymous
mapping for numpy, torch.empty): the bytes received are the only writes, and a caller who drops
one tensor frees it.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import mmap
import sys
from typing import Any, ClassVar, Protocol

from ocibridge.errors import OcibridgeError
from ocibridge.lazyread.safetensors import NUMPY_TYPES
from ocibridge.lazyread.tensorfile import TensorInfo

#: torch's name of each safetensors dtype (``getattr(torch, name)``; U16/U32/U64: torch 2.3 on)
TORCH_TYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "F16": "float16",
               "BF16": "bfloat16", "I32": "int32", "U32": "uint32", "F32": "float32", "I64": "int64",
               "U64": "uint64", "F64": "float64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}


class Framework(Protocol):
    """Allocates each tensor's memory and makes the array the caller gets."""

    name: str

    def refuses(self, info: TensorInfo) -> str | None:
        """Why a tensor of ``info.dtype`` cannot be made (None: it can), asked before any byte moves."""
        ...

    def allocate(self, nbytes: int) -> tuple[Any, memoryview]:
        """A buffer of ``nbytes`` and a writable byte view of it (format ``B``)."""
        ...

    def finish(self, buffer: Any, info: TensorInfo) -> Any:
        """The tensor: ``buffer`` (whose bytes have all landed and been verified) viewed as its dtype and shape."""
        ...


class _ModuleArrays:
    """A framework that is one importable module (numpy, torch): imported when the framework is
    chosen (``missing``: the one error line when it is not installed), each tensor's memory that
    module's ``empty`` bytes, written only by the bytes received."""

    name: str
    missing: ClassVar[str]

    def __init__(self) -> None:
        # (typed loosely: the module is an extra, and mypy runs without it too)
        self._module: Any = _module(self.name, self.missing)

    def allocate(self, nbytes: int) -> tuple[Any, memoryview]:
        buffer = self._module.empty(nbytes, dtype=self._module.uint8)
        return buffer, self._bytes(buffer)

    def _bytes(self, buffer: Any) -> memoryview:
        """A writable byte view (format ``B``) of one of this module's ``empty`` buffers."""
        return memoryview(buffer)


class NumpyArrays:
    """numpy arrays (the ``ocibridge[tensors]`` extra), each a view of memory of its own that
    needs no numpy to allocate (:func:`anonymous_memory`): numpy is imported only at the first
    tensor handed over, while the rest stream in, not before the first request (its
    import was ~0.1 s of start-up before the wire, ~1% of a GiB at 1 Gbit/s)."""

    name = "numpy"
    missing = "load_tensors needs numpy for numpy arrays: pip install 'ocibridge[tensors]' (or framework='torch')"

    def __init__(self) -> None:
        if importlib.util.find_spec("numpy") is None:  # (said before any request, as when imported now)
            raise OcibridgeError(self.missing)
        self._numpy: Any = None

    def refuses(self, info: TensorInfo) -> str | None:
        if info.dtype in NUMPY_TYPES:
            return None
        return f"{info.dtype}, which numpy has no type for (framework='torch' has)"

    def allocate(self, nbytes: int) -> tuple[Any, memoryview]:
        return anonymous_memory(nbytes)

    def finish(self, buffer: Any, info: TensorInfo) -> Any:
        if self._numpy is None:
            self._numpy = _module(self.name, self.missing)
        numpy = self._numpy
        dtype = numpy.dtype(NUMPY_TYPES[info.dtype]).newbyteorder("<")
        return numpy.frombuffer(buffer, dtype=dtype).reshape(info.shape)


#: mappings from this size are asked for transparent huge pages, as numpy asks for its own (fewer faults)
HUGE_PAGES_FROM = 4 * 1024 * 1024


def anonymous_memory(nbytes: int) -> tuple[Any, memoryview]:
    """``nbytes`` of new private memory, untouched until written (its pages come at the first
    write, as numpy.empty's), and a writable byte view of it; freed once nothing refers to it."""
    if nbytes == 0:
        empty = bytearray()
        return empty, memoryview(empty)
    if sys.platform == "win32":
        memory = mmap.mmap(-1, nbytes)  # (anonymous and the process's own there)
    else:  # private: a shared mapping is shmem, which gets no huge pages and costs ~0.2 s more per GiB to free
        memory = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE)
    if sys.platform == "linux" and nbytes >= HUGE_PAGES_FROM:
        with contextlib.suppress(OSError):  # (a kernel without transparent huge pages: small ones do)
            memory.madvise(mmap.MADV_HUGEPAGE)
    return memory, memoryview(memory)


class TorchTensors(_ModuleArrays):
    """torch tensors in host memory (no ``device``): the bytes land in them directly."""

    name = "torch"
    missing = "framework='torch' needs PyTorch, which is not installed: pip install torch (or framework='numpy')"

    def refuses(self, info: TensorInfo) -> str | None:
        if getattr(self._module, TORCH_TYPES.get(info.dtype, "-"), None) is not None:
            return None
        return f"{info.dtype}, which this torch ({self._module.__version__}) has no type for"

    def _bytes(self, buffer: Any) -> memoryview:
        return bytes_of(buffer)

    def finish(self, buffer: Any, info: TensorInfo) -> Any:
        return buffer.view(getattr(self._module, TORCH_TYPES[info.dtype])).reshape(info.shape)


def _module(name: str, missing: str) -> Any:
    """The framework's module, imported now; ``missing``: the one error line when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise OcibridgeError(missing) from None


def bytes_of(tensor: Any) -> memoryview:
    """A writable byte view (format ``B``) of a 1-D uint8 torch tensor in host memory, which
    the caller keeps alive as long as the view (torch tensors do not export the buffer protocol)."""
    nbytes = tensor.numel()
    if nbytes == 0:
        return memoryview(bytearray())
    return memoryview((ctypes.c_ubyte * nbytes).from_address(tensor.data_ptr())).cast("B")
