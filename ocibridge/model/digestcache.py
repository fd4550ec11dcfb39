"""A cache of file digests keyed by identity and change time, so a re-push of an unchanged
multi-GB model does not read its files at all (the registry's HEAD answers for them).

Keyed by (path, device, inode, size, mtime_ns, ctime_ns): any write to the file changes
ctime, so a stale entry can only come from deliberately forged timestamps — and even then the
destination's digest verification during the copy refuses the content. ``OCIBRIDGE_DIGEST_CACHE=0``
turns it off; it lives in the cache root (``$OCIBRIDGE_CACHE``).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from ocibridge.core.environment import DIGEST_CACHE, cache_root, switched_on
from ocibridge.core.sqlitefile import ThreadConnections

cache_dir = cache_root


def enabled() -> bool:
    return switched_on(DIGEST_CACHE)


def _key(path: Path) -> tuple[str, int, int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


_conns = ThreadConnections(
    "CREATE TABLE IF NOT EXISTS digests (path TEXT, dev INTEGER, ino INTEGER, size INTEGER,"
    " mtime INTEGER, ctime INTEGER, digest TEXT, PRIMARY KEY (path, dev, ino, size, mtime, ctime))")


def _connect() -> sqlite3.Connection | None:
    """The calling thread's connection to the cache (None: not used)."""
    return _conns.get(cache_dir() / "digests.sqlite")


def lookup(path: Path) -> str | None:
    if not enabled():
        return None
    key = _key(path)
    conn = _connect() if key else None
    if conn is None or key is None:
        return None
    try:
        row = conn.execute(
            "SELECT digest FROM digests WHERE path=? AND dev=? AND ino=? AND size=? AND mtime=? AND ctime=?",
            key,
        ).fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def remember(path: Path, digest: str) -> None:
    if not enabled():
        return
    key = _key(path)
    conn = _connect() if key else None
    if conn is None or key is None:
        return
    with contextlib.suppress(sqlite3.Error), conn:  # one transaction, committed
        conn.execute("DELETE FROM digests WHERE path=?", (key[0],))
        conn.execute("INSERT OR REPLACE INTO digests VALUES (?,?,?,?,?,?,?)", (*key, digest))
