"""Staged bytes leave the page cache once read and on disk (ocibridge/core/pagecache.py, issue 64):
the relay (uploads/relay.py's Following) lets go of what it has read, a step behind, so a large
upload holds no more cached memory than a few steps of it; on these virtual machines the pages
its next bytes go into are then ones freed a moment ago (bench/page_cost.py)."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from ocibridge.core import pagecache
from ocibridge.hubserver.uploads import relay

MiB = 1024 * 1024


def resident(path: Path) -> int:
    """Bytes of ``path`` in the page cache (util-linux's fincore)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                         check=True, capture_output=True, text=True).stdout
    return int(out.strip())


def test_let_go_drops_the_pages_on_disk(tmp_path):
    path = tmp_path / "staged"
    with open(path, "wb") as f:
        f.write(os.urandom(16 * MiB))
        f.flush()
        os.fsync(f.fileno())  # on disk: every page is clean
        assert resident(path) >= 8 * MiB
        pagecache.let_go(f.fileno(), 4 * MiB, 8 * MiB)
        assert resident(path) <= 8 * MiB + 64 * 1024  # the middle went, the ends stayed
        pagecache.let_go(f.fileno())
    assert resident(path) == 0
    assert path.read_bytes()[:4] and path.stat().st_size == 16 * MiB  # gone from memory, not from disk


def test_the_relay_lets_go_of_what_it_has_read_a_step_behind(tmp_path, monkeypatch):
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(relay, "let_go", lambda fd, start, length: calls.append((start, length)))
    monkeypatch.setattr(relay, "LET_GO_STEP", 4 * MiB)
    path = tmp_path / "upload"
    data = os.urandom(19 * MiB)
    path.write_bytes(data)
    follow = relay.Following(path, len(data))
    threading.Thread(target=follow.grew, args=(len(data),)).start()
    got = bytearray()
    buf = bytearray(MiB)
    while n := follow.readinto(memoryview(buf)):
        got += buf[:n]
    follow.close()
    assert bytes(got) == data  # what it reads is untouched
    # every step: from where all went the time before, to where it has read
    assert calls == [(0, 4 * MiB), (0, 8 * MiB), (4 * MiB, 8 * MiB), (8 * MiB, 8 * MiB)]
    covered = {mb for start, length in calls for mb in range(start // MiB, (start + length) // MiB)}
    assert covered == set(range(16))  # all read but the last step is let go
