"""core/sqlitefile.py: a thread keeps a bounded number of index connections open, so a process
that goes through many cache roots (each test of this suite has its own) does not run out of
file descriptors: a worker of this suite held 1,000+ and select() failed on one past FD_SETSIZE."""

from __future__ import annotations

import os
import threading

from ocibridge.core.sqlitefile import KEPT_PER_THREAD, ThreadConnections


def _open_descriptors_under(root) -> int:
    fds = os.listdir("/proc/self/fd")
    return sum(1 for fd in fds if os.path.realpath(f"/proc/self/fd/{fd}").startswith(str(root)))


def test_a_thread_keeps_at_most_the_last_few_connections_open(tmp_path):
    conns = ThreadConnections("CREATE TABLE IF NOT EXISTS t (k TEXT)", wal=True)
    opened = [conns.get(tmp_path / f"root{n}" / "index.sqlite") for n in range(KEPT_PER_THREAD * 5)]
    assert all(c is not None for c in opened)
    # each open connection holds the file, its WAL and shared memory: only the last few are left
    assert 0 < _open_descriptors_under(tmp_path) <= 3 * KEPT_PER_THREAD
    last = tmp_path / f"root{KEPT_PER_THREAD * 5 - 1}" / "index.sqlite"
    assert conns.get(last) is opened[-1]  # the most recent is kept and handed out again
    again = conns.get(tmp_path / "root0" / "index.sqlite")  # a closed one is opened anew, and works
    assert again is not None and again is not opened[0]
    again.execute("INSERT INTO t VALUES ('x')")


def test_each_thread_has_its_own_connections(tmp_path):
    conns = ThreadConnections("CREATE TABLE IF NOT EXISTS t (k TEXT)")
    db = tmp_path / "index.sqlite"
    mine = conns.get(db)
    theirs: list[object] = []
    worker = threading.Thread(target=lambda: theirs.append(conns.get(db)))
    worker.start()
    worker.join()
    assert mine is not None and theirs[0] is not None and theirs[0] is not mine
