"""Upload sessions kept across runs, so a killed push continues where the registry is.

A large blob is uploaded as a sequence of PATCH chunks; after each one the registry answered,
the session URL and the offset it covers are written to a small file in the user's cache
(``uploads/`` in the cache directory). The next run of the same push
finds it by the registry, the repository and the source's identity (its digest, or for a file
whose digest is not known yet its path, inode, size and mtime), asks the registry how far the
session got, and continues. Nothing here is trusted: the registry checks the final digest, so
a wrong offset or a changed file ends in a fresh session, never in a wrong blob.

The file is ``flock``-ed while its upload runs: a second process pushing the same source
uploads on its own instead of stealing the session.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from pathlib import Path

from ocibridge.core.environment import UPLOAD_RESUME, cache_root, switched_on
from ocibridge.core.lockfile import PlantedLink, open_in_dir

#: Sessions older than this are not resumed (distribution purges uploads after a week).
MAX_AGE = 6 * 24 * 3600


def uploads_dir() -> Path:
    """``uploads/`` in the cache root (``$OCIBRIDGE_CACHE``)."""
    return cache_root() / "uploads"


def file_identity(path: Path) -> tuple[str, int]:
    """What names a file's content without reading it (path, device, inode, size, mtime),
    and its size."""
    st = os.stat(path)
    return (f"file:{os.path.abspath(path)}:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}",
            st.st_size)


def _remove_stale(directory: Path) -> None:
    """States of killed pushes nobody ran again: removed once too old to resume."""
    limit = time.time() - MAX_AGE
    for entry in os.scandir(directory):
        with contextlib.suppress(OSError):
            if entry.name.endswith(".json") and entry.stat().st_mtime < limit:
                os.unlink(entry.path)


class UploadState:
    """The persisted session of one upload; held locked from open() to close()."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd = fd
        self.location: str | None = None
        self.offset = 0
        self._read()

    @classmethod
    def open(cls, base: str, repository: str, identity: str) -> UploadState | None:
        """The state of this upload, locked; None when resume is off, the cache is not
        writable, or another process holds it."""
        if not switched_on(UPLOAD_RESUME):
            return None
        key = hashlib.sha256(f"{base}\n{repository}\n{identity}".encode()).hexdigest()
        directory = uploads_dir()
        path = directory / f"{key}.json"
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            _remove_stale(directory)
            fd = open_in_dir(path, os.O_RDWR | os.O_CREAT, 0o600, make_parent=False)
        except (OSError, PlantedLink):  # a link planted at its name: resume is off, nothing written there
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return cls(path, fd)

    def _read(self) -> None:
        try:
            data = json.loads(os.pread(self._fd, 64 * 1024, 0) or b"{}")
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        location, offset, saved = data.get("location"), data.get("offset"), data.get("saved")
        fresh = isinstance(saved, (int, float)) and time.time() - saved < MAX_AGE
        if fresh and isinstance(location, str) and isinstance(offset, int) and offset >= 0:
            self.location, self.offset = location, offset

    def save(self, location: str, offset: int) -> None:
        """Record a session and the bytes the registry confirmed (after a chunk's 202)."""
        self.location, self.offset = location, offset
        body = json.dumps({"location": location, "offset": offset, "saved": time.time()}).encode()
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, body, 0)

    def forget(self) -> None:
        """The session is done or dead: nothing to resume."""
        self.location, self.offset = None, 0
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)

    def close(self) -> None:
        """Release the lock; an empty state file is removed."""
        if self._fd < 0:
            return
        with contextlib.suppress(OSError):
            if os.fstat(self._fd).st_size == 0:
                self.path.unlink()
        os.close(self._fd)
        self._fd = -1
