"""Which repositories of a registry held a blob, remembered on disk across runs.

A push in a later process can then mount a blob from the repository an earlier push, pull or
manifest read saw it in, instead of uploading it again (Docker's client keeps the same in its
blob-info cache). sqlite3 rather than an append-only file: many processes (parallel pushes, a
mirror's shards) update one index at once, and WAL with a busy timeout gives each write one
short transaction without a lock file of our own or a compaction pass to bound the size.

Only ``(registry base URL, digest, repository, when)`` is stored: no credentials, no tags.
Rows are bounded twice: a few repositories per blob (most recent kept), and a total past which
the least recently seen rows are dropped. Any failure to open, read or write makes the index
silent: it holds candidates, never facts, and a push without it uploads as before.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ocibridge.core.environment import BLOB_HOMES as ENV_BLOB_HOMES
from ocibridge.core.environment import cache_root, switched_on
from ocibridge.core.sqlitefile import ThreadConnections

if TYPE_CHECKING:
    import sqlite3

#: Repositories remembered per blob, most recent first; older ones are forgotten.
HOMES_PER_BLOB = 3
#: Rows kept in all; the least recently seen go first. Measured: 48 MB for 204,500 rows (about
#: 235 bytes each with the key and time indexes), a write of a manifest's 8 digests 0.14 ms,
#: a lookup 0.01 ms, a count 0.6 ms.
MAX_ROWS = 200_000
#: Writes by this process between two counts of the rows (a count is a scan of the index).
CHECK_EVERY = 64

_DIGEST = re.compile(r"^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})\Z")
_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(?:/[A-Za-z0-9][A-Za-z0-9._-]*)*\Z")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS homes (base TEXT NOT NULL, digest TEXT NOT NULL,"
    " repository TEXT NOT NULL, seen INTEGER NOT NULL, PRIMARY KEY (base, digest, repository))",
    "CREATE INDEX IF NOT EXISTS homes_seen ON homes (seen)",
)


def index_dir() -> Path:
    """``$OCIBRIDGE_CACHE/blobhomes``: delete it to forget every remembered home."""
    return cache_root() / "blobhomes"


def plausible(digest: str, repository: str) -> bool:
    """Whether a row could name a blob and a repository (the file is the user's to edit)."""
    return bool(_DIGEST.match(digest)) and len(repository) <= 255 and bool(_REPOSITORY.match(repository))


class BlobIndex:
    """The on-disk ``(base, digest) → repositories`` index under :func:`index_dir` (looked up
    at each call, so a changed ``$OCIBRIDGE_CACHE`` is followed); thread- and process-safe."""

    def __init__(self, max_rows: int = MAX_ROWS, check_every: int = CHECK_EVERY,
                 directory: Path | None = None) -> None:
        self._max, self._check_every, self._directory = max_rows, check_every, directory
        self._conns = ThreadConnections(*_SCHEMA, timeout=2, wal=True, mode=0o700)
        self._lock = threading.Lock()
        self._writes = 0

    def enabled(self) -> bool:
        return switched_on(ENV_BLOB_HOMES)

    def file(self) -> Path | None:
        """The index file writes go to now (None: the index is off)."""
        return (self._directory or index_dir()) / "index.sqlite" if self.enabled() else None

    def remember(self, base: str, repository: str, digests: Iterable[str], where: Path | None = None) -> None:
        """``repository`` of ``base`` held each of ``digests`` just now; ``where``: the index
        file as :meth:`file` named it when that was seen (a write made later goes there)."""
        import sqlite3  # here, not at import: a copy's start-up does not pay for it (~1.3 ms)

        rows = [d for d in dict.fromkeys(digests) if plausible(d, repository)]
        conn = self._connect(where) if rows else None
        if conn is None:
            return
        now = time.time_ns()
        try:
            with conn:  # one transaction for a manifest's blobs
                conn.executemany("INSERT OR REPLACE INTO homes VALUES (?, ?, ?, ?)",
                                 [(base, d, repository, now) for d in rows])
                conn.executemany(
                    "DELETE FROM homes WHERE base = ? AND digest = ? AND repository NOT IN"
                    " (SELECT repository FROM homes WHERE base = ? AND digest = ?"
                    "  ORDER BY seen DESC LIMIT ?)",
                    [(base, d, base, d, HOMES_PER_BLOB) for d in rows])
            if self._due():
                self._trim(conn)
        except sqlite3.Error:
            return

    def candidates(self, base: str, digest: str) -> list[str]:
        import sqlite3

        conn = self._connect()
        if conn is None:
            return []
        try:
            rows = conn.execute("SELECT repository FROM homes WHERE base = ? AND digest = ?"
                                " ORDER BY seen DESC LIMIT ?", (base, digest, HOMES_PER_BLOB)).fetchall()
        except sqlite3.Error:
            return []
        return [str(r[0]) for r in rows if isinstance(r[0], str) and plausible(digest, r[0])]

    def forget(self, base: str, digest: str, repository: str) -> None:
        """A remembered home that did not hold the blob (deleted since, or never did)."""
        import sqlite3

        conn = self._connect()
        if conn is None:
            return
        try:
            with conn:
                conn.execute("DELETE FROM homes WHERE base = ? AND digest = ? AND repository = ?",
                             (base, digest, repository))
        except sqlite3.Error:
            return

    def clear(self) -> None:
        import sqlite3

        conn = self._connect()
        if conn is None:
            return
        try:
            with conn:
                conn.execute("DELETE FROM homes")
        except sqlite3.Error:
            return

    def rows(self) -> int:
        import sqlite3

        conn = self._connect()
        if conn is None:
            return 0
        try:
            return int(conn.execute("SELECT COUNT(*) FROM homes").fetchone()[0])
        except sqlite3.Error:
            return 0

    def _due(self) -> bool:
        with self._lock:
            self._writes += 1
            return self._writes % self._check_every == 1 or self._check_every == 1

    def _trim(self, conn: sqlite3.Connection) -> None:
        excess = self.rows() - self._max
        if excess > 0:
            with conn:
                conn.execute("DELETE FROM homes WHERE rowid IN"
                             " (SELECT rowid FROM homes ORDER BY seen LIMIT ?)", (excess,))

    def _connect(self, where: Path | None = None) -> sqlite3.Connection | None:
        """The calling thread's connection to the current index file (or ``where``); None when
        it is off or cannot be opened (a read-only home, a corrupt file): then nothing is remembered."""
        target = where or self.file()
        return self._conns.get(target) if target is not None and self.enabled() else None
