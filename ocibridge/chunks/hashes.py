"""The one place that turns a chunk table's hash name into a hasher.

A table says which hash made its chunk digests (its ``algorithm`` field: docs/lazy.md), and
every reader checks chunks with that hash, never another: a digest must not depend on which
packages happen to be installed, so both hashes ship with ocibridge (``blake3`` is a core
dependency). New tables use BLAKE3 (6.8 GB/s on one core here, against 2.0 GB/s for hashlib's
SHA-256 with SHA-NI); tables written before it named SHA-256 and are read as they are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Protocol

from ocibridge.errors import ChunkTableError

SHA256 = "sha256"
BLAKE3 = "blake3"
#: what new tables are written with (push, ``chunks REF``, serve's uploads)
DEFAULT = BLAKE3
#: every hash a table may name; each gives 32 bytes, written as 64 lower-case hex digits
KNOWN = (SHA256, BLAKE3)


class ChunkHasher(Protocol):
    """What hashlib's objects and blake3's offer: fed in pieces, read once at the end."""

    def update(self, data: bytes | bytearray | memoryview, /) -> object: ...

    def hexdigest(self) -> str: ...


def check_name(name: object) -> str:
    """``name`` when it is a hash a table may name, else one clear error (never a traceback)."""
    if name not in KNOWN:
        raise ChunkTableError(f"unknown chunk hash {name!r} (this ocibridge knows {', '.join(KNOWN)}; "
                              "a newer one may know it)")
    return str(name)


def factory(name: str) -> Callable[[], ChunkHasher]:
    """A maker of fresh hashers of the hash ``name`` names."""
    if check_name(name) == SHA256:
        return hashlib.sha256
    try:
        from blake3 import blake3
    except ImportError:  # a broken install: blake3 is a dependency of ocibridge
        raise ChunkTableError("BLAKE3 chunk tables need the blake3 package, a dependency of ocibridge: "
                              "reinstall ocibridge (pip install --force-reinstall ocibridge)") from None
    return blake3


def hexdigest(name: str, data: bytes | bytearray | memoryview) -> str:
    """The hex digest of ``data`` with the hash ``name`` names."""
    hasher = factory(name)()
    hasher.update(data)
    return hasher.hexdigest()


def is_chunk_digest(value: object) -> bool:
    """Whether ``value`` is written as every known hash's digest is: 64 lower-case hex digits."""
    return isinstance(value, str) and len(value) == 64 and not value.strip("0123456789abcdef")
