"""torch tensors on a ``device`` (``load_tensors(framework="torch", device=...)``): each is
allocated on the device, and its bytes reach it through the staging rings of
``lazyread.staging``, checked in host memory first. For CUDA a ring is pinned host memory
(:data:`~ocibridge.lazyread.devicering.RING` bytes per request in flight) and its copies are
asynchronous on a CUDA stream of its own; for any other device (``"cpu"`` included, which is how
the suite runs this path without a GPU) a ring is plain memory and each copy is done on return.
"""

from __future__ import annotations

from typing import Any

from ocibridge.errors import OcibridgeError
from ocibridge.lazyread.devicering import Lane
from ocibridge.lazyread.frameworks import TorchTensors, bytes_of
from ocibridge.lazyread.tensorfile import TensorInfo


class TorchOnDevice(TorchTensors):
    """torch tensors on ``device``; a file without a chunk table (checked only whole) lands in
    host memory as with no device, each tensor copied to the device as it is handed over."""

    def __init__(self, device: str) -> None:
        super().__init__()
        torch = self._module
        try:
            self.device = torch.device(device)
        except (RuntimeError, TypeError) as e:
            raise OcibridgeError(f"device={device!r} is not a torch device: {e}") from None
        if self.device.type == "cuda":
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if count == 0:
                raise OcibridgeError(f"device={device!r}: this torch ({torch.__version__}) sees no CUDA device "
                                     "here; leave device out (or device='cpu') for tensors in host memory")
            if self.device.index is not None and self.device.index >= count:
                raise OcibridgeError(f"device={device!r}: this machine has {count} CUDA device(s), "
                                     f"cuda:0 to cuda:{count - 1}")
            if self.device.index is None:  # ("cuda": the current one, named as tensors name theirs)
                self.device = torch.device("cuda", torch.cuda.current_device())

    def allocate_on_device(self, nbytes: int) -> Any:
        return self._module.empty(nbytes, dtype=self._module.uint8, device=self.device)

    def lane(self, nbytes: int) -> Lane:
        if self.device.type == "cuda":
            return CudaLane(self._module, self.device, nbytes)
        return HostLane(self._module, nbytes)

    def write(self, dst: Any, offset: int, data: memoryview) -> None:
        if len(data):
            source = self._module.frombuffer(data, dtype=self._module.uint8)
            dst[offset:offset + len(data)].copy_(source)

    def finish(self, buffer: Any, info: TensorInfo) -> Any:
        tensor = super().finish(buffer, info)
        return tensor if tensor.device == self.device else tensor.to(self.device)


class CudaLane:
    """Pinned host memory, copied out of on a CUDA stream of its own (asynchronous copies)."""

    def __init__(self, torch: Any, device: Any, nbytes: int):
        self._torch = torch
        self._device = device
        self._buffer = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        self.view = bytes_of(self._buffer)
        self._stream = torch.cuda.Stream(device=device)

    def begin(self) -> None:
        # (tensors were allocated on the default stream: what it queued before them comes first)
        self._stream.wait_stream(self._torch.cuda.default_stream(self._device))

    def copy(self, start: int, dst: Any, offset: int, nbytes: int) -> None:
        with self._torch.cuda.stream(self._stream):
            dst[offset:offset + nbytes].copy_(self._buffer[start:start + nbytes], non_blocking=True)

    def mark(self) -> Any:
        event = self._torch.cuda.Event()
        event.record(self._stream)
        return event

    def wait(self, token: Any) -> None:
        token.synchronize()


class HostLane:
    """Plain host memory, copied out of synchronously (``device="cpu"`` and devices other than CUDA)."""

    def __init__(self, torch: Any, nbytes: int):
        self._buffer = torch.empty(nbytes, dtype=torch.uint8)
        self.view = bytes_of(self._buffer)

    def begin(self) -> None:
        pass

    def copy(self, start: int, dst: Any, offset: int, nbytes: int) -> None:
        dst[offset:offset + nbytes].copy_(self._buffer[start:start + nbytes])

    def mark(self) -> Any:
        return None

    def wait(self, token: Any) -> None:
        pass
