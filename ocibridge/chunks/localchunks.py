"""Chunks this machine may hold outside the model cache's index, for delta downloads: a file
(the one a pull into a directory is about to replace: the old version of the same file), and
several places asked in turn. What they give is checked by the reader (chunks/delta.py)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from pathlib import Path

from ocibridge.chunks.delta import LocalChunks


class FileChunks:
    """The chunks of ``path`` (cut at ``chunk_size``) that ``wanted`` names, found by hashing
    the file once; a file that cannot be read, or is not a regular file, holds none."""

    def __init__(self, path: Path, chunk_size: int, wanted: set[str]):
        self._places: dict[str, int] = {}
        self._fd: int | None = None
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                return
            self._fd = fd
            offset = 0
            while chunk := os.pread(fd, chunk_size, offset):
                digest = hashlib.sha256(chunk).hexdigest()
                if digest in wanted:
                    self._places.setdefault(digest, offset)
                offset += len(chunk)

    def has(self, sha256_hex: str) -> bool:
        return sha256_hex in self._places

    def read(self, sha256_hex: str, size: int) -> bytes | None:
        offset = self._places.get(sha256_hex)
        if offset is None or self._fd is None:
            return None
        try:
            return os.pread(self._fd, size, offset)
        except OSError:
            return None

    def damaged(self, sha256_hex: str) -> None:
        self._places.pop(sha256_hex, None)  # changed since it was hashed

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


class AnyChunks:
    """Several places, asked in order; a chunk that read wrong is reported to the place that
    gave it."""

    def __init__(self, places: list[LocalChunks]):
        self._places = places
        self._gave: dict[str, LocalChunks] = {}

    def has(self, sha256_hex: str) -> bool:
        return any(p.has(sha256_hex) for p in self._places)

    def read(self, sha256_hex: str, size: int) -> bytes | None:
        for place in self._places:
            if place.has(sha256_hex):
                data = place.read(sha256_hex, size)
                if data is not None:
                    self._gave[sha256_hex] = place
                    return data
        return None

    def damaged(self, sha256_hex: str) -> None:
        place = self._gave.pop(sha256_hex, None)
        if place is not None:
            place.damaged(sha256_hex)

    def close(self) -> None:
        for place in self._places:
            place.close()
