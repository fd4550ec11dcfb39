"""Bytes that look random (they do not compress) and are the same on every run: a seed's chain
of SHA-256 blocks."""

from __future__ import annotations

import hashlib


def noise(n: int, seed: int = 0) -> bytes:
    out = bytearray()
    block = seed.to_bytes(4, "big")
    while len(out) < n:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:n])
