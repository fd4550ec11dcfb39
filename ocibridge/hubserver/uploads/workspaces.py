"""The directories a commit is built in (:func:`.writes.commits.linked_tree`), and what a
crash leaves of them.

A commit links its files into a directory under ``serve/staging/commits/`` and push reads it;
leaving removes it. A serve killed mid-commit (``kill -9``, the node lost) never leaves, and the
hard links it made keep staged bytes on the disk after the staged files themselves expire. So
each directory is held: an exclusive ``flock`` on its ``.held`` file for as long as the commit
runs, which the kernel lets go when the process dies, however it dies. :func:`sweep_dead`
(run by :meth:`.staging.Staging.clean`) removes every directory whose lock it can take: its
commit is over. The lock is taken before ``.held`` gets its name, so a directory is never seen
held by no one while its commit is starting.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

HELD = ".held"


@contextlib.contextmanager
def held_directory(under: Path, prefix: str = "commit-") -> Iterator[Path]:
    """A new directory under ``under``, held (by this process) until leaving, then removed."""
    under.mkdir(parents=True, exist_ok=True)
    top = Path(tempfile.mkdtemp(dir=under, prefix=prefix))
    fd = os.open(top / f"{HELD}.new", os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.replace(top / f"{HELD}.new", top / HELD)
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)
        os.close(fd)


def sweep_dead(under: Path) -> int:
    """Remove the directories under ``under`` no live process holds; how many went. One whose
    ``.held`` is not named yet is being made: left for the next sweep."""
    removed = 0
    for top in under.iterdir() if under.is_dir() else ():
        with contextlib.suppress(OSError):
            fd = os.open(top / HELD, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError (an OSError): held
                shutil.rmtree(top)
                removed += 1
            finally:
                os.close(fd)
    return removed
