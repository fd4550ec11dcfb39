"""A safetensors file's bytes in an anonymous memory file (Linux ``memfd_create``), which the
loaded tensors are views of.

Why: a tensor buffer the process allocates is fresh anonymous memory, which the kernel zeroes
page by page on first touch before the received bytes overwrite it; on the measured VM that
zeroing was most of a 1 GiB load's system time (docs/benchmarks.md, issue 80). A page of a
memory file that a write fills whole is never zeroed, and a plain-HTTP body is spliced into it
inside the kernel as ``pull`` splices into a file (stores/registry/splicing.py), so the bytes
cross into the process only when the chunk check reads them through the mapping. Nothing
reaches a disk: the file has no name in any file system and goes with its last mapping.
"""

from __future__ import annotations

import mmap
import os
import re

from ocibridge.stores.ranged import LandingReader, RangeReader, read_full

#: memfd_create(2) is Linux's (os.memfd_create: Python 3.8 on Linux)
AVAILABLE = hasattr(os, "memfd_create")


class FileMemory:
    """``size`` bytes of memory file for the file ``name``, mapped shared and writable; the
    descriptor is kept until :meth:`release` (the landing writes through it), the mapping for
    as long as any view of it lives."""

    def __init__(self, name: str, size: int):
        self.size = size
        self.fd = os.memfd_create(re.sub(r"[^A-Za-z0-9._-]", "_", name)[-200:] or "file", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
            self.map = mmap.mmap(self.fd, size)
        except BaseException:
            os.close(self.fd)
            raise
        self.view = memoryview(self.map)

    def land(self, reader: RangeReader, start: int, end: int) -> int:
        """Bytes ``[start, end)`` of the file from ``reader`` (whose next byte is ``start``):
        spliced or written into the memory file where the reader can, else received into the
        mapping. The bytes that came (fewer only when the reader ended early)."""
        at = start
        lander = reader if isinstance(reader, LandingReader) else None
        while at < end:
            n = lander.land_into(self.fd, at, end - at) if lander is not None else None
            if n is None:
                return at - start + read_full(reader, self.view[at:end])
            if n == 0:
                break
            at += n
        return at - start

    def release(self) -> None:
        """Close the descriptor (the mapping stays while views of it live)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
