"""Hashing what an upload writes: its SHA-256 and, for a large file, its chunk table, seen as the
bytes pass."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE, PUSH_THRESHOLD
from ocibridge.core.fsutil import writev_all

if TYPE_CHECKING:
    from ocibridge.chunks.chunking import ChunkHasher


def hash_file(path: Path, size: int) -> tuple[str, tuple[str, ...] | None]:
    """The SHA-256 of the file and, when ``size`` is large, its chunk table: one read for both."""
    from ocibridge.chunks.chunking import ChunkHasher

    digest = hashlib.sha256()
    chunks = ChunkHasher(DEFAULT_CHUNK_SIZE, threaded=False) if size >= PUSH_THRESHOLD else None
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
            if chunks is not None:
                chunks.update(block)
    return digest.hexdigest(), chunks.finish() if chunks is not None else None


def write_pieces(fd: int, pieces: list[bytes], chunks: ChunkHasher | None = None, whole: Any = None) -> None:
    """Write ``pieces`` to ``fd`` whole, in one call, not joined first (a joined MiB was a fresh
    allocation and a copy each time); ``chunks`` and ``whole`` (a hashlib object) see each."""
    hash_pieces(pieces, chunks, whole)
    writev_all(fd, pieces)


def hash_pieces(pieces: list[bytes], chunks: ChunkHasher | None = None, whole: Any = None) -> None:
    """Let ``chunks`` (a chunk table) and ``whole`` (a hashlib object) see each of ``pieces``."""
    for piece in pieces:
        if chunks is not None:
            chunks.update(piece)
        if whole is not None:
            whole.update(piece)
