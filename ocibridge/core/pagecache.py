"""Letting go of a file's pages in the page cache once they are on disk.

Why: serve stages what it is sent (a Xet xorb, an LFS file, the file built from xorbs) and reads
each of them back once, a moment later, to check, build or relay it; kept in the page cache they
hold as much memory as was sent, and the pages the next bytes are written into are then new to
the machine. On virtual machines that give the memory a guest frees back to the host (the
balloon's free page reporting), a page new to the guest costs ~10x one freed a moment ago:
1.9-2.8 s against 0.22-0.28 s of kernel CPU a GiB written (``python -m bench.page_cost``).

``POSIX_FADV_DONTNEED`` drops the pages of a range that are written back, and begins the
writeback of the others without waiting for it: calling it again a little later drops those.
"""

from __future__ import annotations

import os
import sys


def let_go(fd: int, start: int = 0, length: int = 0) -> None:
    """Drop the cached pages of ``fd``'s bytes ``[start, start + length)`` (``length`` 0: to the
    end) that are on disk, and begin writing back the others. Off Linux (macOS has no such call)
    nothing: the pages then stay until memory is short, as any file's."""
    if sys.platform == "linux":
        os.posix_fadvise(fd, start, length, os.POSIX_FADV_DONTNEED)
