"""Who a serve process is to the writer lease (:mod:`.writerlease`): a random id, kept in its
cache (``serve/writer-id``) under ``flock`` for as long as the process runs.

Why kept: a writer killed (``kill -9``, an OOM kill) and restarted on the same cache -- what
docs/serve.md tells an operator to do -- finds its own id in the lease and takes writes again at
once, instead of waiting out the expiry of a lease that names nobody alive. Why locked: a
second live process on the same cache (a shared ReadWriteMany volume, a rolling update) must
not pass for the first; it cannot take the lock, so it gets an id of its own, never written
down. The kernel drops the lock with the process, so a dead holder's id is free for the next
process on that cache. Within one process every application on one cache shares the id (the
lease is a process's, as a branch's lock is).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import threading
from pathlib import Path

from ocibridge.core.lockfile import open_in_dir

FILE = "writer-id"
_ID = re.compile(r"[0-9a-f]{32}")
_held: dict[str, str] = {}  # the id of each file this process holds the lock of
_fds: dict[str, int] = {}  # their descriptors, open (and locked) until released or the process ends
_lock = threading.Lock()


def new_id() -> str:
    return secrets.token_hex(16)


def holder_id(directory: Path) -> str:
    """This process's id for the cache directory ``directory``: the one kept there when this is
    the only live process using it (made and kept the first time), else a fresh one."""
    path = directory / FILE
    key = str(path.absolute())
    with _lock:
        if key in _held:
            return _held[key]
        try:
            fd = open_in_dir(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return new_id()  # a cache serve cannot write: an id for this process alone
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another live process uses this cache (or it takes no lock)
            os.close(fd)
            return new_id()
        kept = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        if not _ID.fullmatch(kept):
            kept = new_id()
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, kept.encode() + b"\n", 0)
        _held[key] = kept
        _fds[key] = fd  # the lock lasts until the last application on this cache closes
        return kept


def release(directory: Path) -> None:
    """This process no longer serves from ``directory``: its id's lock goes (an application
    closed; a process making applications one after another, as a test suite does, keeps no
    descriptor of each)."""
    key = str((directory / FILE).absolute())
    with _lock:
        fd = _fds.pop(key, None)
        _held.pop(key, None)
    if fd is not None:
        os.close(fd)  # the lock with it
