"""File locks of the model cache: processes that resolve the same blob or snapshot wait for
each other instead of downloading or building twice; ``prune`` waits for every build."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def flocked(path: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold an ``flock`` on ``path`` (created) for the block. Each call opens its own file, so
    two threads of one process exclude each other as two processes do."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
