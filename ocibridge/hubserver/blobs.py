"""A file's bytes, verified, and kept in the model cache; one fetch per digest.

- A blob the model cache holds (verified when it was written) is read from there.
- From a registry (a store that sends parts of blobs), the blob is fetched once into the cache
  by pull's own download and every request for it, whole or a range, follows that file as its
  verified prefix grows (:mod:`.follow`): the first bytes go out while the rest arrives.
- From another store, a whole file is streamed while it is hashed and written into the cache;
  the last chunk is held back until the digest is checked, so a client never receives a whole
  body that is wrong: on a mismatch the body iterator raises, and the server cuts the connection
  before the response completes. A verified blob is renamed into the cache. A byte range is
  read from the cache once the blob is fetched into it.
- Requests for a digest being fetched wait for that fetch (an event per digest, on the event
  loop: no worker thread is held while waiting), then read the cache.

Work on files and sockets runs in worker threads (``anyio.to_thread``), one chunk at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol

import anyio.to_thread

from ocibridge.cache.locks import flocked
from ocibridge.chunks.tablehash import TableAndDigestHasher
from ocibridge.core.fsutil import TEMP_PREFIX
from ocibridge.errors import DigestMismatch
from ocibridge.hubserver.follow import Fill, FillView, follow
from ocibridge.oci.digest import CHUNK, split_digest
from ocibridge.oci.models import Descriptor
from ocibridge.stores.inorder_hash import Frontier
from ocibridge.stores.ranged import RangedBlobSource

if TYPE_CHECKING:
    from ocibridge.cache.models import ModelCache
    from ocibridge.chunks.table import LayerChunks
    from ocibridge.stores.base import Store

#: a layer's chunk digests and the table's chunk size
TableOf = tuple["LayerChunks", int]

#: blobs and snapshot files are read-only in the model cache
READ_ONLY = 0o444


async def read_file(path: Path, start: int, end: int) -> AsyncIterator[bytes]:
    """Bytes ``[start, end)`` of a (verified) local file, a chunk at a time."""
    f = await anyio.to_thread.run_sync(open, path, "rb")
    try:
        await anyio.to_thread.run_sync(f.seek, start)
        left = end - start
        while left > 0:
            chunk = await anyio.to_thread.run_sync(f.read, min(CHUNK, left))
            if not chunk:
                raise DigestMismatch(f"{path}: shorter than its {end} bytes")
            left -= len(chunk)
            yield chunk
    finally:
        await anyio.to_thread.run_sync(f.close)


class Checked(Protocol):
    """A blob's file, read only as far as it is verified."""

    def open(self) -> int:
        """A descriptor of the file (the caller closes it)."""
        ...

    async def until(self, end: int) -> object:
        """Return once bytes ``[0, end)`` are verified (raise if they never will be): a stamp
        for :meth:`confirm`."""
        ...

    def confirm(self, stamp: object, end: int) -> None:
        """After reading bytes below ``end``: raise unless they were still verified bytes."""
        ...

    def ready(self, end: int) -> bool:
        """Whether :meth:`until` would return at once."""
        ...


class CheckedFile:
    """A file verified whole (the model cache's blob, a snapshot's file)."""

    def __init__(self, path: Path):
        self.path = path

    def open(self) -> int:
        return os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)

    async def until(self, end: int) -> object:
        return None

    def confirm(self, stamp: object, end: int) -> None:
        return None

    def ready(self, end: int) -> bool:
        return True


def _table_key(chunks: TableOf | None) -> str | None:
    """The content key of a layer's table (whose word early bytes of a fetch are), if any."""
    return chunks[0].content_key(chunks[1]) if chunks is not None else None


class Blobs:
    """Blobs of the model cache, filled from registries once per digest."""

    def __init__(self, cache: ModelCache):
        self.cache = cache
        self._filling: dict[str, asyncio.Event] = {}
        self._fills: dict[str, Fill] = {}  # registry fetches in progress, by digest
        self.fetched = 0  # blobs fetched from a source (for tests and the log)

    def cached(self, layer: Descriptor) -> Path | None:
        """The model cache's verified copy of ``layer``, if it holds one."""
        return self.cache.blobs.blob_path(layer.digest) if self.cache.blobs.exists(layer) else None

    def filling(self, layer: Descriptor) -> bool:
        """Whether a fetch of ``layer`` is in progress."""
        return layer.digest in self._fills or layer.digest in self._filling

    async def body(self, store: Store, manifest: Descriptor, layer: Descriptor,
                   start: int, end: int, chunks: TableOf | None = None) -> AsyncIterator[bytes]:
        """Bytes ``[start, end)`` of ``layer``: from the cache, else from one fetch shared by
        every request for it (followed as it arrives, from a registry; checked chunk by chunk
        against ``chunks`` too, so Xet requests that join it get verified chunks early)."""
        found = self.cached(layer)
        if found is not None:
            return read_file(found, start, end)
        if isinstance(store, RangedBlobSource) and layer.size > 0:
            fetch = await self._shared_fetch(store, layer, chunks)
            return read_file(fetch, start, end) if isinstance(fetch, Path) else follow(fetch, start, end)
        found = await self.wait(layer)
        if found is None and (start or end != layer.size):
            found = await self.fill(store, manifest, layer)
        if found is not None:
            return read_file(found, start, end)
        return self.stream(store, layer)

    async def checked(self, store: Store, manifest: Descriptor, layer: Descriptor,
                      chunks: TableOf | None = None) -> Checked:
        """``layer``'s bytes as they are verified, for senders that may send no other (Xet's):
        the model cache's copy; else the registry fetch, checked chunk by chunk against
        ``chunks`` (the table the manifest binds) as it arrives, or whole when there is none or
        the fetch under way is checked by another manifest's table."""
        found = self.cached(layer)
        if found is not None:
            return CheckedFile(found)
        if isinstance(store, RangedBlobSource) and layer.size > 0:
            fetch = await self._shared_fetch(store, layer, chunks)
            if isinstance(fetch, Path):
                return CheckedFile(fetch)
            key = _table_key(chunks)
            return FillView(fetch, whole=key is None or key != fetch.table_key)
        return CheckedFile(await self.fill(store, manifest, layer))

    async def _shared_fetch(self, store: RangedBlobSource, layer: Descriptor, chunks: TableOf | None) -> Fill | Path:
        """The registry fetch of ``layer`` under way, else one started now; or the cache's copy,
        when a fetch of the other kind (a store that sends no parts) put it there meanwhile."""
        fill = self._fills.get(layer.digest)
        if fill is None:
            found = await self.wait(layer)
            if found is not None:
                return found
            # started by a request that waited alongside, else by this one
            fill = self._fills.get(layer.digest) or self._follow_fetch(store, layer, chunks)
        return fill

    def _follow_fetch(self, store: RangedBlobSource, layer: Descriptor, chunks: TableOf | None = None) -> Fill:
        fill = Fill(layer.digest, layer.size, self.cache.blobs.blob_path(layer.digest))
        fill.table_key = _table_key(chunks)
        self._fills[layer.digest] = fill
        blobs, locks = self.cache.blobs, self.cache.locks

        def table_hasher() -> TableAndDigestHasher:
            assert chunks is not None
            hasher = TableAndDigestHasher(*chunks)  # a new one each time the download starts over
            fill.set_hasher(hasher)
            return hasher

        def fetch(on_hashed: Frontier) -> None:
            # the cache's lock: another process filling the same cache waits, then finds it
            with flocked(locks / f"{split_digest(layer.digest)[1]}.lock"):
                if not blobs.exists(layer):
                    blobs.download_blob(layer, store, on_hashed=on_hashed,
                                        hasher_for=table_hasher if chunks is not None else None)
                    os.chmod(blobs.blob_path(layer.digest), READ_ONLY)

        def done(ended: Fill) -> None:
            if self._fills.get(layer.digest) is ended:
                del self._fills[layer.digest]
            if ended.verified:
                self.fetched += 1

        fill.start(fetch, done)
        return fill

    async def wait(self, layer: Descriptor) -> Path | None:
        """Wait out a fetch of ``layer`` in progress; then the cache's copy, if any."""
        for _ in range(2):
            event = self._filling.get(layer.digest)
            if event is None:
                break
            await event.wait()
        return self.cached(layer)

    async def fill(self, store: Store, manifest: Descriptor, layer: Descriptor) -> Path:
        """Fetch ``layer`` into the cache (verified) unless there; its path."""
        found = await self.wait(layer)
        if found is not None:
            return found
        event = self._claim(layer)
        try:
            from ocibridge.cache.source import CacheSource

            source = CacheSource(self.cache.blobs, self.cache.locks, store, manifest)
            await anyio.to_thread.run_sync(source.ensure, layer)
            self.fetched += len(source.fetched)
        finally:
            self._release(layer, event)
        return self.cache.blobs.blob_path(layer.digest)

    def stream(self, store: Store, layer: Descriptor) -> AsyncIterator[bytes]:
        """The whole blob from ``store``, hashed while sent and written into the cache; claimed
        now (a request that comes while it runs waits for it)."""
        event = self._claim(layer)
        return self._stream(store, layer, event)

    def _claim(self, layer: Descriptor) -> asyncio.Event:
        event = asyncio.Event()
        self._filling[layer.digest] = event
        return event

    def _release(self, layer: Descriptor, event: asyncio.Event) -> None:
        if self._filling.get(layer.digest) is event:
            del self._filling[layer.digest]
        event.set()

    async def _stream(self, store: Store, layer: Descriptor, event: asyncio.Event) -> AsyncIterator[bytes]:
        expected = layer.digest.split(":", 1)[1]
        final = self.cache.blobs.blob_path(layer.digest)
        reader: BinaryIO | None = None
        staged: Path | None = None
        out: BinaryIO | None = None
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=final.parent)
            staged = Path(name)
            out = os.fdopen(fd, "wb")
            reader = await anyio.to_thread.run_sync(store.open_blob, layer)
            h = hashlib.sha256()
            size = 0
            held = b""  # the last chunk read: sent only once the next is read, or the digest checked

            def step() -> bytes:
                assert reader is not None and out is not None
                chunk = reader.read(CHUNK)
                if chunk:
                    out.write(chunk)
                return chunk

            while True:
                chunk = await anyio.to_thread.run_sync(step)
                if not chunk:
                    break
                h.update(chunk)
                size += len(chunk)
                if size > layer.size:
                    raise DigestMismatch(f"{store.describe()}: blob {layer.digest} is larger than its "
                                         f"{layer.size} bytes")
                if held:
                    yield held
                held = chunk
            if size != layer.size or h.hexdigest() != expected:
                raise DigestMismatch(f"{store.describe()}: blob {layer.digest} does not match its digest "
                                     f"(got sha256:{h.hexdigest()}, {size} bytes): the connection is cut")
            await anyio.to_thread.run_sync(out.close)
            os.chmod(staged, READ_ONLY)
            os.replace(staged, final)
            staged = None
            self.fetched += 1
            if held:
                yield held
        finally:
            if out is not None:
                out.close()
            if staged is not None:
                with contextlib.suppress(FileNotFoundError):
                    staged.unlink()
            if reader is not None:
                with contextlib.suppress(Exception):
                    reader.close()
            self._release(layer, event)
