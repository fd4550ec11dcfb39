"""Chunks this machine may hold outside the model cache's index, for delta downloads: a file
(the one a pull into a directory is about to replace: the old version of the same file), and
several places asked in turn. What they give is checked by the reader (chunks/delta.py)."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from ocibridge.chunks.chunktable import LayerChunks
from ocibridge.chunks.delta import LocalChunks


class FileChunks:
    """The chunks of ``path`` (cut at ``chunk_size``) that ``wanted`` names, found by hashing
    the file once with ``wanted``'s hash; a file that cannot be read, or is not a regular file,
    holds none."""

    def __init__(self, path: Path, chunk_size: int, wanted: LayerChunks):
        names = set(wanted.chunks)
        new = wanted.hasher_factory()
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
                hasher = new()
                hasher.update(chunk)
                digest = hasher.hexdigest()
                if digest in names:
                    self._places.setdefault(digest, offset)
                offset += len(chunk)

    def has(self, hexdigest: str) -> bool:
        return hexdigest in self._places

    def read(self, hexdigest: str, size: int) -> bytes | None:
        offset = self._places.get(hexdigest)
        if offset is None or self._fd is None:
            return None
        try:
            return os.pread(self._fd, size, offset)
        except OSError:
            return None

    def damaged(self, hexdigest: str) -> None:
        self._places.pop(hexdigest, None)  # changed since it was hashed

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

    def has(self, hexdigest: str) -> bool:
        return any(p.has(hexdigest) for p in self._places)

    def read(self, hexdigest: str, size: int) -> bytes | None:
        for place in self._places:
            if place.has(hexdigest):
                data = place.read(hexdigest, size)
                if data is not None:
                    self._gave[hexdigest] = place
                    return data
        return None

    def damaged(self, hexdigest: str) -> None:
        place = self._gave.pop(hexdigest, None)
        if place is not None:
            place.damaged(hexdigest)

    def close(self) -> None:
        for place in self._places:
            place.close()
