"""Leases on blobs: a failed writer's undo never removes a blob another writer relies on.

Two pushes into one store can share a blob: B finds it present (written a moment ago by A) and
skips it; A then fails and takes back "its" new blobs. Without a record of B's reliance, A
removes the blob and B tags an artifact that names a missing file. As containerd's content
store does with leases, every writer records the digests it found present or is about to write
in a lease file of its own (``.ocibridge-leases/<pid>-<random>``), held under ``flock`` for as
long as it writes; an undo skips every digest a live lease names. The claim ("found present")
and the undo both run under the store's lock file, so one of them happens wholly first: either
the undo sees the claim and keeps the blob, or the claim finds the blob gone and it is written
again. A lease whose holder died is unlocked (the kernel drops ``flock`` with the process) and
is removed by the next undo that meets it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ocibridge.core.lockfile import open_in_dir

LEASE_DIR = ".ocibridge-leases"


class Leases:
    """This writer's lease in ``root``, and the claims of the others; ``lock_path`` is the
    store's lock file (or directory), under which claims are made and read."""

    def __init__(self, root: Path, lock_path: Path) -> None:
        self.dir = root / LEASE_DIR
        self.lock_path = lock_path
        self._dir_lock = lock_path == root  # the user's directory (maybe reached by a link), locked as it is
        self._mine: BinaryIO | None = None
        self._name: str | None = None
        self._claimed: set[str] = set()
        # also run when dropped, or at exit
        self._end: weakref.finalize[[Path, bool, Path, BinaryIO], Leases] | None = None

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """The store's lock: claims, and undos reading them, are one step each. ``lock_path``
        may be a directory (the store's root: no lock file left among another program's files)."""
        return _locked(self.lock_path, self._dir_lock)

    def claim(self, digest: str) -> None:
        """Record that this writer relies on ``digest`` (call under :meth:`locked`)."""
        if digest in self._claimed:
            return
        if self._mine is None:
            self.dir.mkdir(exist_ok=True)
            self._name = f"{os.getpid()}-{secrets.token_hex(8)}"
            fd = open_in_dir(self.dir / self._name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND,
                             make_parent=False)  # inside the store, never through a planted link
            self._mine = os.fdopen(fd, "ab")  # held for the lease's life
            fcntl.flock(self._mine, fcntl.LOCK_EX)
            # a store never closed (a library caller) still ends its lease: no file is left behind
            self._end = weakref.finalize(self, _end_lease, self.lock_path, self._dir_lock,
                                         self.dir / self._name, self._mine)
        self._mine.write(digest.encode() + b"\n")
        self._mine.flush()
        self._claimed.add(digest)

    def held_by_others(self) -> set[str]:
        """Digests named by the live leases of other writers (call under :meth:`locked`);
        leases whose holder is gone are removed on the way."""
        held: set[str] = set()
        try:
            names = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return held
        for name in names:
            if name == self._name:
                continue
            path = self.dir / name
            try:
                f = open(path, "rb")  # noqa: SIM115 - closed below
            except FileNotFoundError:
                continue
            with f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # its writer is alive: what it claimed stays
                    held.update(line.decode("ascii", "replace") for line in f.read().split())
                    continue
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()  # its writer died: the lease is over
        with contextlib.suppress(OSError):
            self.dir.rmdir()  # no lease left (under the lock: no writer is between mkdir and open)
        return held

    def others_alive(self) -> bool:
        """Whether another writer holds a lease (call under :meth:`locked`)."""
        self.held_by_others()  # removes the leases of writers that are gone
        try:
            return any(n != self._name for n in os.listdir(self.dir))
        except FileNotFoundError:
            return False

    def release(self) -> None:
        """End this writer's lease: what it relies on is listed in the index by now, or given up."""
        if self._end is not None:
            self._end()  # runs once: unlinks the lease file, closes it (which drops its flock)
        self._mine, self._name, self._end = None, None, None
        self._claimed.clear()


@contextlib.contextmanager
def _locked(lock_path: Path, directory: bool) -> Iterator[None]:
    """The store's lock: a directory of the user's (an Ollama models directory) is locked as it
    is; a lock file (a layout's ``.ocibridge.lock``) is created inside the store, never through
    a link planted at its name (core/lockfile.py)."""
    if directory:
        fd = os.open(lock_path, os.O_RDONLY | os.O_DIRECTORY)
    else:
        fd = open_in_dir(lock_path, os.O_RDWR | os.O_CREAT, 0o666, make_parent=False)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _end_lease(lock_path: Path, directory: bool, path: Path, file: BinaryIO) -> None:
    """Remove a lease (and the lease directory, when it was the last) under the store's lock:
    not between another writer's ``mkdir`` of the directory and the creation of its lease."""
    try:
        with _locked(lock_path, directory):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            with contextlib.suppress(OSError):
                path.parent.rmdir()
    except OSError:
        pass  # the store is gone (a layout removed by its undo): nothing to clean
    finally:
        file.close()
