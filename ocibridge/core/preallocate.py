"""Disk blocks taken for a file before its bytes are written (Linux ``fallocate``).

Why: ext4 allocates a file written piece by piece as its pages are dirtied (delayed
allocation: a reservation, an extent looked up and inserted, for every page written); a file
whose blocks are taken at once is written into extents that already exist, for less of the
writer's kernel CPU (docs/bench-2core-serve-cpu.md).
``FALLOC_FL_KEEP_SIZE``: the file's size stays what is written, so a body that ends early
leaves no zeros behind it. Not ``os.posix_fallocate``: where the file system has no
``fallocate``, the C library emulates it by writing a byte into every block.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import sys
from collections.abc import Callable

#: ``fallocate``'s mode: blocks past the end are taken, the size is left as it is
FALLOC_FL_KEEP_SIZE = 1


@functools.lru_cache(maxsize=1)
def _fallocate() -> Callable[[int, int, int, int], int] | None:
    if sys.platform != "linux":
        return None
    with contextlib.suppress(OSError, AttributeError):
        call = ctypes.CDLL(None, use_errno=True).fallocate
        call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        call.restype = ctypes.c_int
        return call
    return None


def take_blocks(fd: int, length: int) -> bool:
    """Take the disk blocks of ``fd``'s first ``length`` bytes, its size unchanged; whether they
    were (not where the system or its file system has no such call, nor on a full disk: the
    write then allocates as it goes, and fails as it would have)."""
    call = _fallocate()
    if call is None or length <= 0:
        return False
    return call(fd, FALLOC_FL_KEEP_SIZE, 0, length) == 0
