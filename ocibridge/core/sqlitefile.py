"""One sqlite3 connection per thread and database file, for the small indexes ocibridge keeps
in its cache root (the digest cache, the content-sample index, where blobs were seen).

Why: opening a connection and creating its table costs ~0.6 ms, a quarter of packing 10,000
small files when done per file; sqlite3 lets a connection serve only the thread that made it.
Every index is a hint, never the truth, so a file that cannot be opened (a read-only home, a
corrupt file) gives None and the caller works without it. sqlite3 is imported on first use:
a command that never opens an index does not pay for it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

#: connections a thread keeps open per index, the most recently opened: a process that works
#: with many cache roots in turn (a notebook changing OCIBRIDGE_CACHE, a test session: each
#: test its own) would otherwise hold three descriptors (file, WAL, shared memory) per root and
#: thread until it runs out of them
KEPT_PER_THREAD = 4


class ThreadConnections:
    """Connections to files made with ``schema`` (statements run once per connection)."""

    def __init__(self, *schema: str, timeout: float = 5.0, wal: bool = False, mode: int = 0o777) -> None:
        self._schema = schema
        self._timeout = timeout  # the busy timeout, for writers in other processes
        self._wal = wal  # many writing processes: readers never wait, a lost last write only loses a hint
        self._mode = mode  # of the directory, when it is made
        self._local = threading.local()

    def get(self, db: Path) -> sqlite3.Connection | None:
        """The calling thread's connection to ``db`` (its directory made), or None."""
        import sqlite3

        conns: dict[Path, sqlite3.Connection] = self._local.__dict__.setdefault("conns", {})
        if db in conns:
            return conns[db]
        try:
            db.parent.mkdir(mode=self._mode, parents=True, exist_ok=True)
            conn = sqlite3.connect(db, timeout=self._timeout)
            if self._wal:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            for statement in self._schema:
                conn.execute(statement)
        except (OSError, sqlite3.Error):
            return None
        conns[db] = conn
        while len(conns) > KEPT_PER_THREAD:  # the oldest first (dicts keep insertion order)
            conns.pop(next(iter(conns))).close()
        return conn
