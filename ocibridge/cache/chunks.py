"""Verified chunks of lazy reads, kept in the model cache so that a range read twice moves once.

    $OCIBRIDGE_CACHE/chunks/sha256/<hex>    one chunk of some layer, named by its SHA-256

Content-addressed, as the chunk tables name them (docs/lazy.md): a chunk shared by two layers
or two models is stored once. A file is written beside its final name and renamed into place,
read-only, so a reader sees a whole chunk or none; writers hold the cache lock shared, so
``prune`` (exclusive) never removes a chunk mid-write. Readers take no lock: a chunk pruned
under them reads as absent, and every chunk read back is checked against the table by the
reader (``remote.blobreader``), so a damaged file costs a fetch, never a wrong byte.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from ocibridge.cache.locks import flocked
from ocibridge.core.fsutil import atomic_writer, write_sliced

_HEX = re.compile(r"[0-9a-f]{64}$")


class CacheChunks:
    """The ``chunks`` directory of a model cache root (a :class:`remote.chunkstore.ChunkStore`)."""

    def __init__(self, root: Path):
        self.root = root
        self.dir = root / "chunks" / "sha256"
        self.lock = root / "locks" / "cache.lock"

    def path(self, sha256_hex: str) -> Path:
        if not _HEX.match(sha256_hex):
            raise ValueError(f"not a SHA-256 hex digest: {sha256_hex!r}")
        return self.dir / sha256_hex

    def has(self, sha256_hex: str) -> bool:
        return self.path(sha256_hex).is_file()

    def get(self, sha256_hex: str) -> bytes | None:
        try:
            return self.path(sha256_hex).read_bytes()
        except OSError:
            return None

    def put(self, sha256_hex: str, data: bytes | bytearray) -> None:
        final = self.path(sha256_hex)
        if final.is_file():
            return
        with contextlib.suppress(OSError), flocked(self.lock, shared=True), atomic_writer(final, 0o444) as out:
            write_sliced(out, data)

    def drop(self, sha256_hex: str) -> None:
        with contextlib.suppress(OSError), flocked(self.lock, shared=True):
            os.unlink(self.path(sha256_hex))

    def files(self) -> list[Path]:
        """The chunk files, oldest first (for prune)."""
        if not self.dir.is_dir():
            return []
        found = [p for p in self.dir.iterdir() if _HEX.match(p.name)]
        return sorted(found, key=_mtime)

    def remove(self, path: Path) -> int:
        """Remove one chunk file; its size, 0 if it was gone."""
        try:
            size = path.stat().st_size
            os.unlink(path)
            return size
        except OSError:
            return 0


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
