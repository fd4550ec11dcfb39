"""What a whole-model load makes of each tensor: the memory its bytes land in, and the array
that is a view of that memory (numpy's, or torch's when asked and installed). Tensors for a
``device`` are torch's too, made in ``lazyread.torchdevice`` (their bytes pass a staging ring).

Each tensor gets a buffer of its own, allocated without being written first (numpy.empty,
torch.empty): the bytes received are the only writes, and a caller who drops one tensor frees it.
"""

from __future__ import annotations

import ctypes
import importlib
from typing import Any, Protocol

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


class NumpyArrays:
    """numpy arrays (the ``ocibridge[tensors]`` extra)."""

    name = "numpy"

    def __init__(self) -> None:
        # (typed loosely: numpy is an extra, and mypy runs without it too)
        self._numpy: Any = _module("numpy", "load_tensors needs numpy for numpy arrays: pip install "
                                            "'ocibridge[tensors]' (or framework='torch')")

    def refuses(self, info: TensorInfo) -> str | None:
        if info.dtype in NUMPY_TYPES:
            return None
        return f"{info.dtype}, which numpy has no type for (framework='torch' has)"

    def allocate(self, nbytes: int) -> tuple[Any, memoryview]:
        buffer = self._numpy.empty(nbytes, dtype=self._numpy.uint8)
        return buffer, memoryview(buffer)

    def finish(self, buffer: Any, info: TensorInfo) -> Any:
        dtype = self._numpy.dtype(NUMPY_TYPES[info.dtype]).newbyteorder("<")
        return buffer.view(dtype).reshape(info.shape)


class TorchTensors:
    """torch tensors in host memory (no ``device``): the bytes land in them directly."""

    name = "torch"

    def __init__(self) -> None:
        self._torch: Any = _module("torch", "framework='torch' needs PyTorch, which is not installed: pip install "
                                            "torch (or framework='numpy')")

    def refuses(self, info: TensorInfo) -> str | None:
        if getattr(self._torch, TORCH_TYPES.get(info.dtype, "-"), None) is not None:
            return None
        return f"{info.dtype}, which this torch ({self._torch.__version__}) has no type for"

    def allocate(self, nbytes: int) -> tuple[Any, memoryview]:
        buffer = self._torch.empty(nbytes, dtype=self._torch.uint8)
        return buffer, bytes_of(buffer)

    def finish(self, buffer: Any, info: TensorInfo) -> Any:
        return buffer.view(getattr(self._torch, TORCH_TYPES[info.dtype])).reshape(info.shape)


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
