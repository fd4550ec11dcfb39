"""Hashing a file (or any stream) into OMS resources: whole, or shard by shard, with the hash
the statement names.

sha256 and blake2b (512-bit, as the OMS algorithm registry defines it) come from hashlib;
blake3 from the ``blake3`` package, installed with the ``blake3`` extra. A blake3 statement
without the package is refused with a line naming the extra: no digest is ever computed with
another hash than the one asked for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Protocol

from ocibridge.core.streams import CHUNK
from ocibridge.errors import SignatureError
from ocibridge.signing.oms import Hashing, shard_name

BLAKE3_MISSING = "blake3 file digests need the blake3 package (pip install 'ocibridge[blake3]')"


class Hasher(Protocol):
    def update(self, data: bytes, /) -> object: ...

    def hexdigest(self) -> str: ...


def hasher_factory(hash_type: str) -> Callable[[], Hasher]:
    """A maker of fresh hashers of ``hash_type``; raises (one line) when blake3 is not installed."""
    if hash_type == "sha256":
        return hashlib.sha256
    if hash_type == "blake2b":
        return hashlib.blake2b
    if hash_type == "blake3":
        try:
            from blake3 import blake3
        except ImportError:
            raise SignatureError(BLAKE3_MISSING) from None
        return blake3
    raise SignatureError(f"OMS hash {hash_type[:20]!r} is not supported")


def hash_stream(read: Callable[[int], bytes], label: str, hashing: Hashing, limit: int | None = None) -> dict[str, str]:
    """The resources of the file ``label`` whose bytes ``read`` gives to EOF: one digest of it
    all, or one per ``shard_size`` bytes (``label:start:end``; an empty file has none). More
    than ``limit`` shards are refused: a statement not yet trusted cannot make a listing grow
    past its own size with a tiny shard size."""
    new = hasher_factory(hashing.hash_type)
    h = new()
    if hashing.shard_size is None:
        while chunk := read(CHUNK):
            h.update(chunk)
        return {label: h.hexdigest()}
    shard, out = hashing.shard_size, {}
    start = position = 0
    while chunk := read(min(CHUNK, start + shard - position)):
        h.update(chunk)
        position += len(chunk)
        if position - start == shard:
            out[shard_name(label, start, position)] = h.hexdigest()
            start, h = position, new()
            if limit is not None and len(out) > limit:
                raise SignatureError(f"{label}: more than {limit} shards of {shard} bytes, more than the OMS "
                                     "signature lists")
    if position > start:
        out[shard_name(label, start, position)] = h.hexdigest()
    return out
