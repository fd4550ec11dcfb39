"""One writer at a time commits into a directory.

Two pulls into one directory each check what is there, then move their files in; without a
lock both can check an empty directory and both commit, one replacing the other's files. The
check and the commit run under an exclusive ``flock`` on the directory itself (Linux and macOS
lock a directory's descriptor as any file's), so no lock file is left among the user's files,
and the kernel drops the lock when a writer dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def directory_locked(path: Path) -> Iterator[None]:
    """Hold ``path`` (an existing directory) exclusively for the block; waits for another holder."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
