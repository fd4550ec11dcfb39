"""A registry repository whose blobs, byte ranges included, are read from the model cache, each
fetched into it once: the processes of one node that load one model (an engine's tensor-parallel
ranks, each of which reads every weight) share one fetch instead of asking the registry N times.

The first process to need a blob fetches it whole under the cache's lock of that blob
(:class:`.blobsource.CacheSource`: resumable, in parts, verified as it lands); the others wait on
that lock, then read the landed file. A range read from here is checked by its reader exactly as
one from the registry (every chunk against the chunk table, or the file against its digest), so
a blob found in the cache is read without being hashed first. Each landed blob is opened once
and read through that descriptor, so a ``prune`` meanwhile cannot take it away mid-read.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable

from ocibridge.cache.keptblobs import KeptBlobs, RangedStore
from ocibridge.cache.modelcache import ModelCache
from ocibridge.errors import OcibridgeError
from ocibridge.oci.models import Descriptor
from ocibridge.stores.ranged import RangeReader


class FileRange:
    """Bytes ``[start, end)`` of an open file (unverified: the reader checks them)."""

    ranged = True

    def __init__(self, fd: int, start: int, end: int):
        self._fd = fd
        self._at = start
        self._end = end

    def readinto(self, buffer: memoryview) -> int:
        n = min(len(buffer), self._end - self._at)
        if n <= 0:
            return 0
        got = os.preadv(self._fd, [buffer[:n]], self._at)
        self._at += got
        return got

    def close(self) -> None:
        """The descriptor is the store's, shared by every range of the blob."""


class LandedBlobs(KeptBlobs):
    """``remote`` with every blob read, whole or in ranges, from the model cache, where it is
    fetched once per node."""

    def __init__(self, remote: RangedStore, cache: ModelCache | None = None,
                 checking: Callable[[str], None] | None = None):
        super().__init__(remote, cache, checking)
        self._landing = threading.Lock()
        self._files: dict[str, int] = {}  # digest -> the landed blob, open

    def open_blob_range(self, desc: Descriptor, start: int, end: int | None = None, *,
                        probe: bool = False) -> RangeReader:
        fd = self._files.get(desc.digest)
        if fd is None:
            fd = self._land(desc)
        return FileRange(fd, start, desc.size if end is None else end)

    def _land(self, desc: Descriptor) -> int:
        """The blob's file in the cache, open (fetched first unless some process landed it)."""
        with self._landing:  # (one landing at a time here: each fetch is itself in parts)
            fd = self._files.get(desc.digest)
            if fd is not None:
                return fd
            blobs = self._cache.blobs
            if not blobs.exists(desc):
                self._cached(desc).ensure(desc)  # under the blob's lock: fetched by one process
            path = blobs.blob_path(desc.digest)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError as e:  # (a link planted there, or pruned since)
                raise OcibridgeError(f"model cache blob {path}: cannot be read ({e.strerror}): refused") from None
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != desc.size:
                os.close(fd)
                raise OcibridgeError(f"model cache blob {path}: not a file of {desc.size} bytes: refused")
            self._files[desc.digest] = fd
            return fd

    def close(self) -> None:
        with self._landing:
            for fd in self._files.values():
                os.close(fd)
            self._files.clear()
        super().close()
