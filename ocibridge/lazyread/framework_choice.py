"""Which framework a whole-model load makes its tensors with (``load_tensors(framework=...,
device=...)``): numpy's arrays, torch's in host memory (:mod:`.frameworks`), or torch's on a
device, their bytes staged through a ring (:mod:`.torchdevice`). Apart from both, so that neither
imports the other's chooser.
"""

from __future__ import annotations

from ocibridge.errors import OcibridgeError
from ocibridge.lazyread.frameworks import Framework, NumpyArrays, TorchTensors


def framework_named(name: str, device: str | None = None) -> Framework:
    """The framework ``load_tensors(framework=...)`` names; one error line when it is not there."""
    if name == "numpy":
        if device is not None:
            raise OcibridgeError(f"device={device!r} is for framework='torch': numpy arrays are in host memory")
        return NumpyArrays()
    if name == "torch":
        if device is None:
            return TorchTensors()
        from ocibridge.lazyread.torchdevice import TorchOnDevice  # (its staging ring: only on a device)

        return TorchOnDevice(device)
    raise OcibridgeError(f"framework={name!r}: 'numpy' or 'torch'")
