"""The mount's read-ahead: the kernel asks a FUSE file system for at most its device's
read-ahead at a time, 128 KiB unless raised (the file system can only lower what the kernel
offers at ``FUSE_INIT``; root can raise it afterwards, ``/sys/class/bdi/<device>/read_ahead_kb``).

A cold ``cat`` of a mounted GiB is CPU-bound on 2 cores (the fill, the registry, the answers
and ``cat`` share them), and each request costs a Python call, two system calls and a thread
hand-off whatever its size: in requests of 1 MiB (the most one request carries, libfuse's
``max_pages`` of 256; the mount asks half that, ``replies.MAX_READ``, so that requests line
up with its chunks) the mount process took 0.1 s less CPU a GiB than in 256 KiB requests.
So a mount raises its own device's read-ahead to :data:`READ_AHEAD_KB` where it may; where
it may not (not root, a read-only ``/sys``), it stays as the kernel set it.

libfuse answers a read given by descriptor (``lazymount.replies.file_reply``) through a buffer
it allocates for each reply (``posix_memalign``) and frees after: at 1 MiB that is over
glibc's ``mmap`` threshold, which aligned allocations keep from rising (measured: an ``mmap``,
256 page faults and a ``munmap`` per request, more CPU than the 256 KiB requests saved).
:func:`keep_reply_buffers` keeps such buffers in the heap, reused from reply to reply.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from pathlib import Path

from ocibridge.lazymount.mounttable import mount_entry
from ocibridge.lazymount.replies import MAX_READ

#: the read-ahead a mount asks for its device: two requests of the most a read asks
#: (``replies.MAX_READ``), a chunk's worth
READ_AHEAD_KB = 2 * MAX_READ // 1024
#: glibc's ``mallopt`` parameters, and what the mount sets them to: allocations up to this
#: size come from the heap (a 1 MiB reply buffer, page-aligned), and a heap keeps this much
#: free memory at its top before it gives any back (two reply buffers). Measured, a cold cat
#: of a mounted GiB: 264,000 page faults and 1.48 s of mount CPU without, 6,000-20,000 and
#: 0.98 s with; the mount process's RSS after it 80-105 MiB (55 MiB without, 69-78 MiB in
#: 256 KiB requests): bounded by the heaps of libfuse's threads
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
HEAP_UP_TO = 1024 * 1024 + 64 * 1024
KEPT_FREE = 2 * 1024 * 1024 + 256 * 1024
BDI = Path("/sys/class/bdi")


def read_ahead_file(directory: Path) -> Path | None:
    """The read-ahead setting of the device mounted at ``directory`` (None: not mounted)."""
    entry = mount_entry(directory)
    if entry is None or not entry.device:
        return None
    return BDI / entry.device / "read_ahead_kb"


def raise_read_ahead(directory: Path, kb: int = READ_AHEAD_KB) -> bool:
    """Raise the read-ahead of the mount at ``directory`` to ``kb`` (never lower it); whether
    it is at least ``kb`` now (False: this process may not set it, or nothing is mounted)."""
    setting = read_ahead_file(directory)
    if setting is None:
        return False
    try:
        # the kernel sets the device's read-ahead when libfuse answers its INIT, after the file
        # system's ``init`` ran (measured: a raise in between was undone); a request waits
        # for that answer. A statfs, not a stat: the root's attributes cached for the mount's
        # life would answer a stat after its process died (``table.clear_dead_mount``)
        os.statvfs(directory)
        if int(setting.read_text()) >= kb:
            return True
        setting.write_text(f"{kb}\n")
        return int(setting.read_text()) >= kb
    except (OSError, ValueError):  # not root, a read-only /sys: the kernel's 128 KiB stays
        return False


def keep_reply_buffers() -> None:
    """Reply buffers of up to :data:`HEAP_UP_TO` from the heap, reused (not a C library's
    ``mallopt``: nothing to do)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        mallopt(M_MMAP_THRESHOLD, HEAP_UP_TO)
        mallopt(M_TRIM_THRESHOLD, KEPT_FREE)
