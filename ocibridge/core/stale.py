"""Temporary files of earlier runs that died (kill -9, power loss) are found and removed.

Every temporary file swept is made by :func:`locked_tempfile` in a layout's blob folders and held
under an exclusive ``flock`` by the process writing it; the kernel drops the lock when that process
dies, however it dies. A temporary file there that can be locked is therefore an orphan. Directories
are made the same way (:func:`locked_directory`: their own prefix, the directory itself under
``flock``): a pull's staging directory, which the next pull into the same DIR sweeps
(:func:`remove_stale_staging`), and a mount's scratch directory of unpacked tar layers in the
temporary folder, which the next mount sweeps. Not swept: the directory a pull moves replaced
files aside into (after a crash it may hold the only copy of the user's files) and the exporters'
temporary archives, which are not locked. A short grace period covers the instant between a
file's creation and its lock. Partial downloads (kept on purpose for a resume) are removed only
once old: a blob nobody asked for again in two weeks is not coming back.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ocibridge.core.fsutil import TEMP_PREFIX

#: seconds a new temporary file is left alone (created, not yet locked)
GRACE_SECONDS = 60.0
#: seconds after which an unlocked partial download is given up
PARTIAL_MAX_AGE = 14 * 24 * 3600.0
#: a pull's staging directory inside DIR (locked while the pull runs)
STAGING_PREFIX = TEMP_PREFIX + "stage-"
#: a mount's scratch directory (its unpacked tar layers) in the temporary folder, locked while mounted
MOUNT_SCRATCH_PREFIX = "ocibridge-mount-"
#: seconds a new staging directory is left alone: it is locked microseconds after it is made,
#: so a short grace suffices (60 s, as for files, let a pull re-run at once after a kill -9
#: leave the killed one's behind)
STAGING_GRACE_SECONDS = 1.0


def locked_tempfile(directory: Path, suffix: str = "") -> tuple[int, str]:
    """``mkstemp`` with our prefix, locked for as long as the descriptor is open."""
    fd, path = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=suffix, dir=directory)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd, path


def remove_stale(directory: Path, partial_prefix: str | None = None) -> int:
    """Remove orphaned temporary files (and old partial downloads) in ``directory``; how many."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return 0

    def min_age(name: str) -> float | None:
        if name.startswith(TEMP_PREFIX):
            return GRACE_SECONDS
        if partial_prefix and name.startswith(partial_prefix):
            return PARTIAL_MAX_AGE
        return None

    return _remove_orphans(entries, min_age, directories=False)


def _remove_orphans(entries: list[os.DirEntry[str]], min_age: Callable[[str], float | None], *,
                    directories: bool) -> int:
    """Remove the entries (files, or directories) older than ``min_age`` of their name (None:
    not ours) that no live process holds locked; how many."""
    removed = 0
    now = time.time()
    for entry in entries:
        age = min_age(entry.name)
        if age is None:
            continue
        with contextlib.suppress(OSError):
            if directories:
                if not entry.is_dir(follow_symlinks=False):
                    continue
            elif not entry.is_file(follow_symlinks=False):
                continue
            if now - entry.stat(follow_symlinks=False).st_mtime < age:
                continue
            if _remove_if_orphaned(entry.path, directory=directories):
                removed += 1
    return removed


def _remove_if_orphaned(path: str, *, directory: bool) -> bool:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECTORY if directory else 0))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live process is writing it, or a live pull is staging there
        if directory:
            shutil.rmtree(path)  # under our lock: no pull can take it meanwhile
        else:
            os.unlink(path)
        return True
    finally:
        os.close(fd)


def locked_directory(parent: Path | None, prefix: str) -> tuple[Path, int]:
    """A new directory named ``prefix``... in ``parent`` (None: the temporary folder), under
    ``flock`` for as long as the returned descriptor is open: once it can be locked, it belongs to
    no live process (:func:`remove_stale_directories`)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return path, fd


@contextlib.contextmanager
def locked_staging(directory: Path) -> Iterator[Path]:
    """A new staging directory in ``directory``, under ``flock`` until the block ends: a
    staging directory that can be locked belongs to no live process."""
    path, fd = locked_directory(directory, STAGING_PREFIX)
    try:
        yield path
    finally:
        os.close(fd)


def remove_stale_staging(directory: Path) -> int:
    """Remove the staging directories of dead pulls in ``directory``; how many."""
    return remove_stale_directories(directory, STAGING_PREFIX)


def remove_stale_directories(parent: Path, prefix: str) -> int:
    """Remove the directories named ``prefix``... in ``parent`` that no live process holds
    locked (:func:`locked_directory`); how many."""
    try:
        entries = list(os.scandir(parent))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    return _remove_orphans(entries, lambda name: STAGING_GRACE_SECONDS if name.startswith(prefix) else None,
                           directories=True)
