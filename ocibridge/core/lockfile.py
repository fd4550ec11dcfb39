"""Lock files (and other files created by name in a shared directory) that never follow links.

A lock is created by name in its directory (``locks/cache.lock``, a layout's ``.ocibridge.lock``,
a ``.partial`` download): ``open(O_CREAT)`` follows a symlink planted there and creates, or
truncates and writes, its target wherever it points. Here the directory is opened without
following its last link (``O_DIRECTORY|O_NOFOLLOW``) and the file is opened relative to it
with ``O_NOFOLLOW``, so the file made or locked is always an entry of that directory, and it
must be a regular file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from ocibridge.errors import OcibridgeError


class PlantedLink(OcibridgeError):
    """A lock or state file whose name (or directory) is a link, or not a regular file."""


def open_in_dir(path: Path, flags: int = os.O_RDWR | os.O_CREAT, mode: int = 0o644, *,
                make_parent: bool = True, parent_mode: int = 0o777) -> int:
    """A descriptor of ``path`` opened (created with ``O_CREAT``) inside its own directory,
    never through a link; raises :class:`PlantedLink` in one line otherwise."""
    parent = path.parent
    if make_parent:
        parent.mkdir(parents=True, exist_ok=True, mode=parent_mode)
    try:
        dir_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PlantedLink(f"{parent}: a symbolic link where a directory of ocibridge's is expected: "
                              "refused (remove it)") from None
        raise
    try:
        try:
            fd = os.open(path.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode, dir_fd=dir_fd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise PlantedLink(f"{path}: a symbolic link where ocibridge keeps a lock or state file: "
                                  "refused (remove it)") from None
            raise
    finally:
        os.close(dir_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise PlantedLink(f"{path}: not a regular file where ocibridge keeps a lock or state file: refused")
    os.set_blocking(fd, True)
    return fd


@contextlib.contextmanager
def flocked_file(path: Path, *, shared: bool = False, mode: int = 0o644) -> Iterator[int]:
    """Hold an ``flock`` on the lock file ``path`` (created inside its directory) for the block."""
    fd = open_in_dir(path, os.O_RDWR | os.O_CREAT, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # releases the lock
