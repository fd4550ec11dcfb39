"""What lets serve send a xorb before a registry fetch ends (serve/follow.py, chunks/tablehash.py):
the table's word for early bytes, the blob's own digest for the cache, and a read confirmed
after it happened."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import pytest

from ocibridge.chunks.table import LayerChunks
from ocibridge.chunks.tablehash import TableAndDigestHasher
from ocibridge.errors import DigestMismatch
from ocibridge.hubserver.reading.follow import Fill, FillView

CHUNK = 4


def chunks_of(data: bytes, digest: str | None = None) -> LayerChunks:
    parts = tuple(hashlib.sha256(data[i:i + CHUNK]).hexdigest() for i in range(0, len(data), CHUNK))
    return LayerChunks(digest or "sha256:" + hashlib.sha256(data).hexdigest(), len(data), parts, "sha256")


def test_the_blob_is_named_by_its_own_digest_not_by_the_tables_word():
    data = b"0123456789abcdef"
    good = TableAndDigestHasher(chunks_of(data), CHUNK)
    good.update(data[:6])
    assert good.verified == 4  # the first chunk, as it matched
    good.update(data[6:])
    assert good.hexdigest() == hashlib.sha256(data).hexdigest() and good.verified == len(data)
    # a table that vouches for other bytes under a trusted blob's digest: its chunks match, and
    # still the blob is refused, and what was read under its word is no longer vouched for
    other = b"OTHER-BYTES-HERE"
    lying = TableAndDigestHasher(chunks_of(other, digest="sha256:" + hashlib.sha256(data).hexdigest()), CHUNK)
    lying.update(other)
    assert lying.verified == len(other)
    assert lying.hexdigest() == "" and lying.dead and lying.verified == 0


def test_a_read_across_a_restart_of_the_download_is_refused(tmp_path: Path):
    data = b"0123456789abcdef"

    async def run() -> None:
        fill = Fill("sha256:" + hashlib.sha256(data).hexdigest(), len(data), tmp_path / "blob")
        first = TableAndDigestHasher(chunks_of(data), CHUNK)
        fill.set_hasher(first)
        fd = os.open(tmp_path / "partial", os.O_RDWR | os.O_CREAT)
        first.update(data[:8])
        fill._on_hashed(fd, 8)
        await asyncio.sleep(0)
        stamp = await fill.until(8)
        fill.confirm(stamp, 8)  # nothing happened between: the bytes read were the checked ones
        assert fill.ready(8) and not fill.ready(12)
        view = FillView(fill, whole=True)  # another manifest's table: only the whole blob counts
        assert not view.ready(8)
        fill.set_hasher(TableAndDigestHasher(chunks_of(data), CHUNK))  # the download started over
        with pytest.raises(DigestMismatch, match="started over"):
            fill.confirm(stamp, 8)
        again = TableAndDigestHasher(chunks_of(data), CHUNK)
        fill.set_hasher(again)
        again.update(data[:8])
        stamp = await fill.until(8)
        again.hexdigest()  # the end of an attempt that failed: the download truncates next
        with pytest.raises(DigestMismatch):
            fill.confirm(stamp, 8)
        os.close(fd)

    asyncio.run(run())
