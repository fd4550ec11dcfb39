"""A whole-model load's check of one file's tensors once its header is read, before any of their
bytes is asked for: the ones its shard index names are there, no name is in two files, and the
framework can hold each one."""

from __future__ import annotations

from ocibridge.errors import OcibridgeError
from ocibridge.lazyread.frameworks import Framework
from ocibridge.lazyread.tensorfile import TensorInfo


def check_tensors(path: str, tensors: dict[str, TensorInfo], expected: frozenset[str] | None,
                  seen: dict[str, str], framework: Framework) -> None:
    """Raise a one-line error for file ``path``'s ``tensors`` (``expected``: those its shard
    index names; ``seen``: tensor name -> the file it was in, the files before this one, to
    which this file's names are added)."""
    if expected is not None:
        missing = sorted(expected - set(tensors))
        if missing:
            listed = ", ".join(map(repr, missing[:3]))
            raise OcibridgeError(f"{path}: the shard index names tensor(s) {listed} in this file, "
                                 "which does not hold them")
    for name, info in tensors.items():
        if name in seen:
            first, second = sorted((seen[name], path))
            raise OcibridgeError(f"tensor {name!r} is in both {first} and {second}: choose the files with files=")
        seen[name] = path
        refused = framework.refuses(info)
        if refused is not None:
            raise OcibridgeError(f"{path}: tensor {name!r} is {refused}")
