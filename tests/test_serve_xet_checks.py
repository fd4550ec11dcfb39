"""What lets serve send a xorb before a registry fetch ends (serve/follow.py, chunks/tablehash.py):
the table's word for early bytes, a blob checked by a table alone kept only under that table's
content key (reading/blobs.py), and a read confirmed after it happened."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import pytest

from ocibridge.cache.models import ModelCache
from ocibridge.chunks.table import LayerChunks
from ocibridge.chunks.tablehash import TableHasher
from ocibridge.errors import DigestMismatch
from ocibridge.hubserver.reading.blobs import Blobs
from ocibridge.hubserver.reading.follow import Fill, FillView
from ocibridge.oci.models import Descriptor

CHUNK = 4


def chunks_of(data: bytes, digest: str | None = None) -> LayerChunks:
    parts = tuple(hashlib.sha256(data[i:i + CHUNK]).hexdigest() for i in range(0, len(data), CHUNK))
    return LayerChunks(digest or "sha256:" + hashlib.sha256(data).hexdigest(), len(data), parts, "sha256")


def test_a_blob_a_table_checked_is_found_only_by_readers_of_that_table(tmp_path: Path):
    """A table vouches for its chunks, not for the layer digest it names (any table may claim
    any digest): the file it checked is found under its content key by readers of the same
    table, never by the layer digest, nor by a reader whose manifest binds another table."""
    data = b"0123456789abcdef"
    layer = Descriptor(mediaType="application/octet-stream", digest="sha256:" + hashlib.sha256(data).hexdigest(),
                       size=len(data))
    table = chunks_of(data)
    lying = chunks_of(b"OTHER-BYTES-HERE", digest=layer.digest)  # the same layer digest, another table
    blobs = Blobs(ModelCache(tmp_path / "cache"))
    kept = blobs.layer_files.layer_target(table.content_key(CHUNK))
    assert kept is not None
    kept.write_bytes(data)
    assert blobs.cached(layer, (table, CHUNK)) == kept
    assert blobs.cached(layer) is None and blobs.cached(layer, (lying, CHUNK)) is None
    kept.write_bytes(data[:8])  # a lazy read's first chunks only: not the whole layer
    assert blobs.cached(layer, (table, CHUNK)) is None
    # the blob under its digest (checked by SHA-256) is every reader's
    whole = blobs.cache.blobs.blob_path(layer.digest)
    whole.parent.mkdir(parents=True, exist_ok=True)
    whole.write_bytes(data)
    assert blobs.cached(layer) == whole == blobs.cached(layer, (lying, CHUNK))


def test_a_read_across_a_restart_of_the_download_is_refused(tmp_path: Path):
    data = b"0123456789abcdef"

    async def run() -> None:
        fill = Fill("sha256:" + hashlib.sha256(data).hexdigest(), len(data), tmp_path / "blob")
        first = TableHasher(chunks_of(data), CHUNK)
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
        fill.set_hasher(TableHasher(chunks_of(data), CHUNK))  # the download started over
        with pytest.raises(DigestMismatch, match="started over"):
            fill.confirm(stamp, 8)
        again = TableHasher(chunks_of(data), CHUNK)
        fill.set_hasher(again)
        again.update(data[:8])
        stamp = await fill.until(8)
        assert again.hexdigest() == ""  # the end of an attempt that failed: the download truncates next,
        fill.confirm(stamp, 8)  # to the checked prefix (stores.partial), so what was read of it stands
        fill.set_hasher(TableHasher(chunks_of(data), CHUNK))  # and once the next attempt starts, nothing does
        with pytest.raises(DigestMismatch):
            fill.confirm(stamp, 8)
        os.close(fd)

    asyncio.run(run())
