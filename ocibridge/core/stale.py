"""Temporary files of earlier runs that died (kill -9, power loss) are found and removed.

The sweep covers a layout's blob folders only, where every temporary file is made by
:func:`locked_tempfile` and held under an exclusive ``flock`` by the process writing it; the
kernel drops the lock when that process dies, however it dies. A temporary file there that can
be locked is therefore an orphan. (Staging folders of pulls and mounts and the exporters'
temporary archives are not locked: widening the sweep to them would delete live files.)
A short grace period covers the instant between a file's
creation and its lock. Partial downloads (kept on purpose for a resume) are removed only
once old: a blob nobody asked for again in two weeks is not coming back.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ocibridge.core.fsutil import TEMP_PREFIX

#: seconds a new temporary file is left alone (created, not yet locked)
GRACE_SECONDS = 60.0
#: seconds after which an unlocked partial download is given up
PARTIAL_MAX_AGE = 14 * 24 * 3600.0


def locked_tempfile(directory: Path, suffix: str = "") -> tuple[int, str]:
    """``mkstemp`` with our prefix, locked for as long as the descriptor is open."""
    fd, path = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=suffix, dir=directory)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd, path


def remove_stale(directory: Path, partial_prefix: str | None = None) -> int:
    """Remove orphaned temporary files (and old partial downloads) in ``directory``; how many."""
    removed = 0
    now = time.time()
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return 0
    for entry in entries:
        if entry.name.startswith(TEMP_PREFIX):
            min_age = GRACE_SECONDS
        elif partial_prefix and entry.name.startswith(partial_prefix):
            min_age = PARTIAL_MAX_AGE
        else:
            continue
        with contextlib.suppress(OSError):
            if not entry.is_file(follow_symlinks=False):
                continue
            if now - entry.stat(follow_symlinks=False).st_mtime < min_age:
                continue
            if _remove_if_orphaned(entry.path):
                removed += 1
    return removed


def _remove_if_orphaned(path: str) -> bool:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live process is writing it
        os.unlink(path)
        return True
    finally:
        os.close(fd)


#: seconds a new staging directory is left alone (made, not yet locked: microseconds apart)
DIR_GRACE_SECONDS = 1.0


@contextlib.contextmanager
def locked_staging_dir(parent: Path) -> Iterator[Path]:
    """A temporary directory in ``parent`` (our prefix), locked while the block runs and
    removed after it. Orphans of runs that were killed (``kill -9``, a power cut) are removed
    first: a directory nobody holds the lock of, so a pull run again into the same DIR leaves
    no ``.ocibridge-tmp-*`` behind, whatever ended the one before."""
    remove_stale_dirs(parent)
    staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=parent))
    fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        os.close(fd)


def remove_stale_dirs(parent: Path) -> int:
    """Remove the staging directories in ``parent`` no live process holds; how many."""
    removed = 0
    now = time.time()
    try:
        entries = list(os.scandir(parent))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    for entry in entries:
        if not entry.name.startswith(TEMP_PREFIX):
            continue
        with contextlib.suppress(OSError):
            if not entry.is_dir(follow_symlinks=False):
                continue
            if now - entry.stat(follow_symlinks=False).st_mtime < DIR_GRACE_SECONDS:
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live process stages there
            finally:
                os.close(fd)
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
    return removed
