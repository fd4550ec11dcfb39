"""The build ahead of a Xet shard (hubserver/xet/ahead.py) starts on a verified xorb as soon as
the next xorb's upload begins, not once that next one is verified: hf_xet sends its first xorbs
one at a time, so waiting for the second to be verified started the registry's upload a whole
xorb's arrival late (issue 64)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from test_serve_xet_ahead import xorb_of

from ocibridge.hubserver.xet import merkle
from ocibridge.hubserver.xet.ahead import Ahead
from ocibridge.hubserver.xet.chunklist import ChunkList


def test_a_verified_xorb_is_built_while_the_next_one_arrives(tmp_path: Path) -> None:
    xorbs, tmp = tmp_path / "xorbs", tmp_path / "tmp"
    xorbs.mkdir()
    data = os.urandom(4 * 64 * 1024)
    raw, name, chunks = xorb_of(data)
    (xorbs / name).write_bytes(raw)
    first, second = merkle.from_hex(name), merkle.from_hex("ab" * 32)
    assert first is not None and second is not None
    ahead = Ahead(xorbs, tmp, None, 1 << 30)  # no registry: the file is written under tmp
    ahead.started("acme/m", first)
    ahead.verified("acme/m", first, ChunkList.of(chunks))
    time.sleep(0.3)  # the build is waiting now (it waits for another xorb to begin after the first)
    ahead.started("acme/m", second)  # begun, never verified: the first is whole all the same
    try:
        deadline = time.monotonic() + 10
        built = b""
        while time.monotonic() < deadline and len(built) < len(data):
            time.sleep(0.02)
            built = b"".join(p.read_bytes() for p in tmp.glob("ahead-*")) if tmp.is_dir() else b""
        assert built == data
    finally:
        assert ahead.take("acme/m", []) is None  # the shard names no such file: what was built goes
    assert not list(tmp.glob("ahead-*"))
