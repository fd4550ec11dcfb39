"""What lets serve send a xorb before a registry fetch ends (serve/follow.py, chunks/tablehash.py):
the table's word for early bytes, a blob checked by a table alone kept only under that table's
content key (reading/blobs.py), and what keeps checked bytes of the file as they are."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from ocibridge.cache.modelcache import ModelCache
from ocibridge.chunks.chunktable import LayerChunks
from ocibridge.chunks.tablehash import TableHasher
from ocibridge.errors import OcibridgeError
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


def test_a_readers_descriptor_keeps_other_downloads_off_the_file(tmp_path: Path):
    """What lets a xorb go out from the fill's file by sendfile after its check, with nothing to
    confirm afterwards: the bytes below the checked mark are never written again while a reader
    holds a descriptor from ``Fill.open``. Within the download (stores.partial: it truncates to
    its checked prefix when it starts over); and against any other download of the file: the
    reader's descriptor shares the download's lock, so a download that would resume the file
    after this one failed cannot take it until the reader lets go."""
    from ocibridge.stores.part_governor import PartsAbandoned
    from ocibridge.stores.partial import open_locked

    data = b"0123456789abcdef"
    partial = tmp_path / "partial"

    async def run() -> None:
        fill = Fill("sha256:" + hashlib.sha256(data).hexdigest(), len(data), tmp_path / "blob")
        failing = threading.Event()

        def fetch(on_hashed: Callable[[int, int], None]) -> None:
            fd = open_locked(partial)
            try:
                hasher = TableHasher(chunks_of(data), CHUNK)
                fill.set_hasher(hasher)
                os.pwrite(fd, data[:8], 0)
                hasher.update(data[:8])
                on_hashed(fd, 8)
                failing.wait(10)
                raise OSError("the registry went away")
            finally:
                os.close(fd)

        ended = asyncio.Event()
        fill.start(fetch, lambda _: ended.set())
        await fill.until(8)  # returns once checked: nothing to confirm after the read
        assert fill.ready(8) and not fill.ready(12)
        assert not FillView(fill, whole=True).ready(8)  # another manifest's table: only the whole blob
        reader = fill.open()
        failing.set()
        await ended.wait()
        with pytest.raises(OcibridgeError, match="went away"):
            fill.checked()
        gone = threading.Event()
        gone.set()
        with pytest.raises(PartsAbandoned):  # the download that would resume it waits for the reader
            open_locked(partial, gone)
        assert os.pread(reader, 8, 0) == data[:8]
        os.close(reader)
        os.close(open_locked(partial, gone))  # let go: the next download resumes the file

    asyncio.run(run())


class _CountedFill(Fill):
    """A Fill that counts its wakes of the loop (each a hop from the fetching thread)."""

    wakes = 0

    def _wake(self) -> None:
        self.wakes += 1
        super()._wake()


def _stepped_fetch(fill: Fill, data: bytes, path: Path, go: threading.Event,
                   held: list[int | None]) -> Callable[[Callable[[int, int], None]], None]:
    """A fetch of ``data`` one table chunk a step once ``go`` is set, checked by the table;
    ``held`` gets the reader's held descriptor at the middle step (None: there was none)."""

    def fetch(on_hashed: Callable[[int, int], None]) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            hasher = TableHasher(chunks_of(data), CHUNK)
            fill.set_hasher(hasher)
            assert go.wait(10)
            for at in range(0, len(data), CHUNK):
                os.pwrite(fd, data[at:at + CHUNK], at)
                hasher.update(data[at:at + CHUNK])
                on_hashed(fd, at + CHUNK)
                if at == len(data) // 2:
                    held.append(FillView(fill, whole=False).open_held())
            os.replace(path, fill.final)
        finally:
            os.close(fd)

    return fetch


def test_a_waiter_is_woken_once_its_bytes_are_checked_not_at_every_step(tmp_path: Path):
    """A cold xorb request waits for its piece of the fetch (``Fill.until``): the fetching thread
    wakes the loop when that piece is checked, not at each step hashed before it (a hop to the
    loop each: ~200 a GiB that woke nobody); while it runs, a reader's descriptor is a copy of
    the fetch's, handed out with no call to the file system (``open_held``: the loop may ask),
    and none is held once it ended."""
    data = os.urandom(16 * CHUNK)

    async def run() -> None:
        fill = _CountedFill("sha256:" + hashlib.sha256(data).hexdigest(), len(data), tmp_path / "blob")
        go, held = threading.Event(), list[int | None]()
        ended = asyncio.Event()
        fill.start(_stepped_fetch(fill, data, tmp_path / "partial", go, held), lambda _: ended.set())
        waiter = asyncio.ensure_future(fill.until(12 * CHUNK))
        await asyncio.sleep(0)  # waiting before the first step
        go.set()
        await waiter
        assert fill.checked() >= 12 * CHUNK
        await ended.wait()
        assert fill.wakes <= 3, fill.wakes  # its piece, and the end (16 steps each woke it before)
        reader = held[0]
        assert reader is not None and os.pread(reader, 4, 0) == data[:4]
        os.close(reader)
        assert FillView(fill, whole=False).open_held() is None  # ended: opened on a worker thread

    asyncio.run(run())
