"""What failed or abandoned pulls left in the pull cache, found and removed for ``cache prune``.

A pull through the cache (:mod:`.pullcache`) removes what it used once it succeeds; a pull
that fails or is stopped leaves its verified blobs (``blobs/sha256/<hex>``), its partial
downloads (``.ocibridge-partial-<hex>`` and their ``.prefix`` records) and its table-checked
layers (``tabled/<key>/``), for the next run of the same pull to resume. Nobody else reads
them, so they are only resumable leftovers, and a prune may take them.

What a running pull holds is never removed:

- a partial download is written under its own ``flock`` (:mod:`.stores.partial`): it is
  removed only under that lock, taken without waiting (held: it stays), and only while the
  file at its name is the one locked;
- a complete blob or table-checked layer has no lock of its own: a running pull may be about
  to read or link it. Every pull holds the pull cache's lock (``PULL_LOCK``) shared for its
  run; a prune takes it exclusive without waiting, and while a pull runs, complete files stay.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ocibridge.core.lockfile import PlantedLink, open_in_dir
from ocibridge.stores.partial import PARTIAL_PREFIX, PREFIX_SUFFIX
from ocibridge.transfer.pullcache import PULL_LOCK
from ocibridge.transfer.tabledpull import TABLED


@dataclass(frozen=True)
class Leftover:
    """One thing a pull left: a complete file, or a partial download (``partial``) with its
    ``.prefix`` record beside it."""

    path: Path
    size: int  # bytes, with its record
    mtime: float  # when it was last written or used (the newer of the file and its record)
    partial: bool


@contextlib.contextmanager
def pulls_paused(root: Path) -> Iterator[bool]:
    """The pull cache's lock at ``root`` taken exclusive without waiting, for the block: True
    when it was (no pull runs, and none starts before the block ends: it waits), False when a
    pull holds it (complete files must stay)."""
    if not root.is_dir():
        yield True
        return
    fd = open_in_dir(root / PULL_LOCK, os.O_RDWR | os.O_CREAT, make_parent=False)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def leftovers(root: Path) -> list[Leftover]:
    """Every leftover in the pull cache at ``root``, least recently written first."""
    found = []
    for directory in _directories(root):
        found += _in(directory)
    return sorted(found, key=lambda leftover: leftover.mtime)


def remove(leftover: Leftover, *, complete_files: bool) -> bool:
    """Remove ``leftover`` unless a running pull holds it (see the module's rule); whether it
    went. ``complete_files``: no pull runs (:func:`pulls_paused` said so)."""
    if not leftover.partial:
        if not complete_files:
            return False
        with contextlib.suppress(FileNotFoundError):
            leftover.path.unlink()
        _remove_empty_key_dir(leftover.path.parent)
        return True
    record = leftover.path.with_name(leftover.path.name + PREFIX_SUFFIX)
    if leftover.path.name.endswith(PREFIX_SUFFIX):  # a record whose partial is gone already
        record = leftover.path
    elif not _unlink_if_unlocked(leftover.path):
        return False
    with contextlib.suppress(FileNotFoundError):
        record.unlink()
    if complete_files:  # no pull is making the folder again this instant
        _remove_empty_key_dir(leftover.path.parent)
    return True


def _directories(root: Path) -> list[Path]:
    """The blob folder of the pull cache's layout and each table key's folder."""
    found = [root / "blobs" / "sha256"]
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        found += sorted(entry for entry in (root / TABLED).iterdir() if entry.is_dir() and not entry.is_symlink())
    return found


def _in(directory: Path) -> list[Leftover]:
    try:
        entries = {entry.name: entry.stat(follow_symlinks=False) for entry in os.scandir(directory)
                   if entry.is_file(follow_symlinks=False)}
    except FileNotFoundError:
        return []
    found = []
    for name, st in entries.items():
        if name.startswith(PARTIAL_PREFIX):
            if name.endswith(PREFIX_SUFFIX):
                if name.removesuffix(PREFIX_SUFFIX) in entries:
                    continue  # counted with its partial
                found.append(Leftover(directory / name, st.st_size, st.st_mtime, partial=True))
                continue
            record = entries.get(name + PREFIX_SUFFIX)
            size = st.st_size + (record.st_size if record else 0)
            mtime = max(st.st_mtime, record.st_mtime if record else 0.0)
            found.append(Leftover(directory / name, size, mtime, partial=True))
        elif not name.startswith("."):  # a complete blob or layer (not a temporary file: the layout sweeps those)
            found.append(Leftover(directory / name, st.st_size, st.st_mtime, partial=False))
    return found


def _unlink_if_unlocked(partial: Path) -> bool:
    """Unlink the partial file under its own lock, taken without waiting; False when a running
    pull holds it (or it was renamed or replaced meanwhile: it is not the file this looked at)."""
    try:
        fd = open_in_dir(partial, os.O_RDWR, make_parent=False)
    except PlantedLink:
        return False  # not a file a pull wrote
    except OSError as e:
        return e.errno == errno.ENOENT  # gone already
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        mine = os.fstat(fd)
        try:
            named = os.stat(partial, follow_symlinks=False)
        except FileNotFoundError:
            return True
        if (named.st_dev, named.st_ino) != (mine.st_dev, mine.st_ino):
            return False  # the writer waited for renamed it, and another began a new one
        os.unlink(partial)  # a pull that opens it now waits for this lock, then starts a new file
        return True
    finally:
        os.close(fd)


def _remove_empty_key_dir(directory: Path) -> None:
    """A table key's folder emptied by the prune goes with its last file (a pull that comes
    for it makes it again)."""
    if directory.parent.name == TABLED:
        with contextlib.suppress(OSError):
            directory.rmdir()  # only when empty
