"""An index of content seen before, keyed by what two small reads can tell about a file: its size
and the SHA-256 of its first and last MiB, to the full digest it had when it was hashed.

Why: a push must not send a blob the registry holds, yet must read a new file only
once. The digest cache (digestcache.py) knows a file by its identity; a fresh copy, a clone or a
touched file is unknown to it. This index names a *candidate* digest for such a file from a 2 MiB
sample, so the push asks the registry about the candidate and confirms it by hashing locally
(nothing sent); a file it has no candidate for is new content, uploaded while it is hashed. A
candidate is only a hint: a file whose middle differs fails the confirmation and is sent.

Files of at most :data:`MIN_SIZE` bytes are not indexed: their sample would be the whole file,
so they are hashed whole and asked about, as before. The index has its own switch
(``OCIBRIDGE_SAMPLE_INDEX=0``: every larger file is then new content, sent while hashed, unless
its push goes to a tag that exists), not the digest cache's: a cold digest cache is exactly the
fresh copy this index is for. It lives beside the digest cache in the cache root.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
from pathlib import Path

from ocibridge.core.environment import SAMPLE_INDEX, cache_root, switched_on
from ocibridge.core.sqlitefile import ThreadConnections

SAMPLE = 1 << 20  # bytes read at each end of a file
MIN_SIZE = 2 * SAMPLE  # a file this size or smaller is its own sample: hashed whole instead
_MEMO_MAX = 4096

_memo: dict[tuple[int, int, int, int, int], str] = {}  # a file's sample, by its identity
_memo_lock = threading.Lock()


def enabled() -> bool:
    return switched_on(SAMPLE_INDEX)


def applies(size: int) -> bool:
    """Whether a file of ``size`` bytes is looked up and indexed here (when :func:`enabled`)."""
    return size > MIN_SIZE


def sample_spans(size: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The byte ranges ``[start, end)`` a sample is made of: the first and the last MiB."""
    return (0, min(SAMPLE, size)), (max(0, size - SAMPLE), size)


def sample_digest(head: bytes, tail: bytes) -> str:
    """The sample of a blob from its two spans' bytes (a file here, a registry blob by Range)."""
    return hashlib.sha256(head + tail).hexdigest()


def sample_of(path: Path) -> tuple[int, str] | None:
    """The file's size and the SHA-256 of its first and last MiB (two reads of 1 MiB), None when it
    cannot be read. Remembered by the file's identity, so the lookup before a push and the
    write after it read the ends once."""
    try:
        with open(path, "rb", buffering=0) as f:
            st = os.fstat(f.fileno())
            identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            with _memo_lock:
                known = _memo.get(identity)
            if known is not None:
                return st.st_size, known
            (h0, h1), (t0, t1) = sample_spans(st.st_size)
            head = os.pread(f.fileno(), h1 - h0, h0)
            tail = os.pread(f.fileno(), t1 - t0, t0)
    except OSError:
        return None
    sample = sample_digest(head, tail)
    with _memo_lock:
        if len(_memo) >= _MEMO_MAX:
            _memo.clear()
        _memo[identity] = sample
    return st.st_size, sample


_conns = ThreadConnections("CREATE TABLE IF NOT EXISTS samples (size INTEGER, sample TEXT, digest TEXT,"
                           " PRIMARY KEY (size, sample))")


def _connect() -> sqlite3.Connection | None:
    return _conns.get(cache_root() / "samples.sqlite")


def lookup(size: int, sample: str) -> str | None:
    """The digest a file of this size and sample had when last hashed (a candidate, unconfirmed)."""
    if not applies(size) or not enabled():
        return None
    conn = _connect()
    if conn is None:
        return None
    try:
        row = conn.execute("SELECT digest FROM samples WHERE size=? AND sample=?", (size, sample)).fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def remember(path: Path, size: int, digest: str) -> None:
    """Index a file just hashed whole to ``digest`` (``size`` bytes; a file changed since is not)."""
    if not applies(size) or not enabled():
        return
    sampled = sample_of(path)
    conn = _connect() if sampled is not None and sampled[0] == size else None
    if conn is None or sampled is None:
        return
    with contextlib.suppress(sqlite3.Error), conn:  # one transaction, committed
        conn.execute("INSERT OR REPLACE INTO samples VALUES (?,?,?)", (size, sampled[1], digest))
