"""A file's bytes, verified, and kept in the model cache; one fetch per digest.

- A blob the model cache holds (verified when it was written) is read from there: under its
  layer digest (checked by SHA-256: any reader's), or, for a reader whose manifest binds a chunk
  table, under that table's content key (``chunks/layers/<key>``, as lazy reads keep layers:
  checked by the table's hash alone, so never found by a layer digest, which any table may claim).
- Otherwise the blob is fetched once into the cache, on a thread of its own (:class:`.follow.Fill`):
  from a registry (a store that sends parts of blobs) by pull's own download, checked by the
  chunk table the manifest binds when there is one (each byte hashed once, with the table's
  hash: kept under the table's key), else by the digest; from another store (a layout) read
  whole while it is hashed and written. Every request for it, whole or a
  range, follows that file as its verified prefix grows (:mod:`.follow`): the first bytes go
  out while the rest arrives, and the last byte is held back until the digest matched, so a
  client never receives a whole body that is wrong (on a mismatch the body iterator raises, and
  the server cuts the connection before the response completes). A verified blob is renamed
  into the cache.
- No request holds the fetch, a lock or a permit while it sends: a client that stops reading
  keeps nobody else from the blob (it is cut by the guard's send timeout, :mod:`.guard`).

Work on files and sockets runs in worker threads (``anyio.to_thread``); the bytes go to the client
by sendfile where the server takes it (:mod:`.fileanswer`, :mod:`..zerocopy`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio.to_thread

from ocibridge.cache.chunks import CacheChunks
from ocibridge.cache.locks import flocked
from ocibridge.chunks.chunktable import LayerChunks
from ocibridge.chunks.tablehash import TableHasher
from ocibridge.core.fsutil import TEMP_PREFIX
from ocibridge.hubserver.reading.fileanswer import Spans, file_spans
from ocibridge.hubserver.reading.follow import Fill, FillView, spans
from ocibridge.oci.digest import CHUNK, split_digest, verified
from ocibridge.oci.models import Descriptor
from ocibridge.stores.inorder_hash import Frontier
from ocibridge.stores.partial import download
from ocibridge.stores.ranged import RangedBlobSource

if TYPE_CHECKING:
    from ocibridge.cache.modelcache import ModelCache
    from ocibridge.stores.base import Store

#: a layer's chunk digests and the table's chunk size
TableOf = tuple["LayerChunks", int]

#: blobs and snapshot files are read-only in the model cache
READ_ONLY = 0o444


class Checked(Protocol):
    """A blob's file, read only as far as it is verified."""

    def open(self) -> int:
        """A descriptor of the file (the caller closes it)."""
        ...

    def open_held(self) -> int | None:
        """A descriptor of the file when one is held open already (a copy of it: no file system
        call, so the event loop may ask), else None: :meth:`open` it on a worker thread."""
        ...

    async def until(self, end: int) -> None:
        """Return once bytes ``[0, end)`` are verified (raise if they never will be); from then
        on they stay as they are in the file for any descriptor :meth:`open` gave."""
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

    def open_held(self) -> int | None:
        return None

    async def until(self, end: int) -> None:
        return None

    def ready(self, end: int) -> bool:
        return True


def _table_key(chunks: TableOf | None) -> str | None:
    """The content key of a layer's table (the name of a file only that table vouches for), if any."""
    return _content_key(*chunks) if chunks is not None else None


@functools.lru_cache(maxsize=256)
def _content_key(chunks: LayerChunks, chunk_size: int) -> str:
    """(asked at every request, and every xorb of a file is one: made once per table entry, as
    it hashes every chunk digest of the layer)"""
    return chunks.content_key(chunk_size)


class Blobs:
    """Blobs of the model cache, filled from registries once per digest and table."""

    def __init__(self, cache: ModelCache):
        self.cache = cache
        self.layer_files = CacheChunks(cache.root)  # its ``chunks/layers``: files checked by a table
        self._filling: dict[str, asyncio.Event] = {}
        # registry fetches in progress, by digest and the content key of the table that checks
        # them (None: checked by the digest, so every reader may follow it)
        self._fills: dict[tuple[str, str | None], Fill] = {}
        self.fetched = 0  # blobs fetched from a source (for tests, the log and /metrics)
        self.hits = 0  # answers sent from the model cache (/metrics)

    def cached(self, layer: Descriptor, chunks: TableOf | None = None) -> Path | None:
        """The model cache's verified copy of ``layer``: under its digest, else, for a reader
        whose manifest binds ``chunks``, the whole layer kept under that table's content key."""
        if self.cache.blobs.exists(layer):
            return self.cache.blobs.blob_path(layer.digest)
        key = _table_key(chunks)
        return None if key is None else self._layer_file(key, layer.size)

    def _layer_file(self, key: str, size: int) -> Path | None:
        """The layer file named ``key`` if it holds the whole layer, marked used (as ``path``
        finds it: :meth:`CacheChunks.whole_layer`)."""
        return self.layer_files.whole_layer_of(key, size)

    def filling(self, layer: Descriptor, chunks: TableOf | None = None) -> bool:
        """Whether a fetch of ``layer`` that a reader with ``chunks`` may follow is in progress."""
        return self._fill_of(layer, _table_key(chunks)) is not None or layer.digest in self._filling

    def _fill_of(self, layer: Descriptor, key: str | None) -> Fill | None:
        """The fetch in progress a reader whose table has content key ``key`` may follow: one
        checked by the digest, else one checked by that same table (never another table's)."""
        fill = self._fills.get((layer.digest, None))
        return fill if fill is not None or key is None else self._fills.get((layer.digest, key))

    async def body(self, store: Store, manifest: Descriptor, layer: Descriptor,
                   start: int, end: int, chunks: TableOf | None = None) -> Spans:
        """Bytes ``[start, end)`` of ``layer``, as spans of its file (:mod:`.fileanswer`: sent by
        sendfile): from the cache, else from one fetch shared by every request for it, followed
        as it arrives (checked chunk by chunk against ``chunks``, the table the manifest binds,
        when there is one). The fetch runs on a thread of its own: no request holds it, so a
        client that stops reading keeps no other waiting."""
        chunks = _ranged(store, chunks)
        found = self.cached(layer, chunks)
        if found is not None:
            self.hits += 1
            return file_spans(found, start, end)
        if layer.size > 0:
            fetch = await self._shared_fetch(store, layer, chunks)
            return file_spans(fetch, start, end) if isinstance(fetch, Path) else spans(fetch, start, end)
        return file_spans(await self.fill(store, manifest, layer), start, end)

    async def checked(self, store: Store, manifest: Descriptor, layer: Descriptor,
                      chunks: TableOf | None = None, asked: bool = False) -> Checked:
        """``layer``'s bytes as they are verified, for senders that may send no other (Xet's):
        the model cache's copy; else the registry fetch, checked chunk by chunk against
        ``chunks`` (the table the manifest binds) as it arrives, or whole when there is none or
        the fetch under way is checked by the digest. ``asked``: the caller found no copy in
        the cache just now (on a worker thread): the fetch under way is followed without asking
        again on the loop (a lock file opened and locked, two stats: each cold xorb request
        did), and with none under way the cache is asked (:meth:`_shared_fetch`)."""
        chunks = _ranged(store, chunks)
        found = None if asked else self.cached(layer, chunks)
        if found is not None:
            self.hits += 1
            return CheckedFile(found)
        if layer.size > 0:
            fetch = await self._shared_fetch(store, layer, chunks)
            if isinstance(fetch, Path):
                return CheckedFile(fetch)
            key = _table_key(chunks)
            return FillView(fetch, whole=key is None or key != fetch.table_key)
        return CheckedFile(await self.fill(store, manifest, layer))

    async def _shared_fetch(self, store: Store, layer: Descriptor, chunks: TableOf | None) -> Fill | Path:
        """The registry fetch of ``layer`` under way that this reader may follow, else one
        started now; or the cache's copy, when a fetch of the other kind (a store that sends no
        parts) put it there meanwhile."""
        key = _table_key(chunks)
        fill = self._fill_of(layer, key)
        if fill is None:
            found = await self.wait(layer, chunks)
            if found is not None:
                return found
            # started by a request that waited alongside, else by this one
            fill = self._fill_of(layer, key) or self._follow_fetch(store, layer, chunks)
        return fill

    def _follow_fetch(self, store: Store, layer: Descriptor, chunks: TableOf | None = None) -> Fill:
        """Start the one fetch of ``layer`` into the cache, on a thread of its own: a registry's
        by pull's download (ranged, resumable), checked by ``chunks`` into the table's layer
        file when given (:meth:`_table_fetch`), else by the digest into the blobs; another
        store's (a layout) read whole while it is hashed (:func:`_copy_into`). Either reports
        its verified-in-order prefix to the Fill."""
        key = _table_key(chunks)
        target = self.layer_files.layer_target(key) if key is not None else None
        if chunks is not None and key is not None and target is not None and isinstance(store, RangedBlobSource):
            fill = Fill(layer.digest, layer.size, target)
            fill.table_key = key
            fetch = self._table_fetch(store, layer, chunks, fill)
        else:
            fill = Fill(layer.digest, layer.size, self.cache.blobs.blob_path(layer.digest))
            fetch = self._digest_fetch(store, layer)
        self._fills[(layer.digest, fill.table_key)] = fill

        def done(ended: Fill) -> None:
            if self._fills.get((layer.digest, ended.table_key)) is ended:
                del self._fills[(layer.digest, ended.table_key)]
            if ended.verified:
                self.fetched += 1

        fill.start(fetch, done)
        return fill

    def _digest_fetch(self, store: Store, layer: Descriptor) -> Callable[[Frontier], None]:
        """The fetch into the blobs, checked by the digest: what any reader may trust."""
        blobs, locks = self.cache.blobs, self.cache.locks

        def fetch(on_hashed: Frontier) -> None:
            # the cache's lock: another process filling the same cache waits, then finds it
            with flocked(locks / f"{split_digest(layer.digest)[1]}.lock"):
                if blobs.exists(layer):
                    return
                if isinstance(store, RangedBlobSource):
                    blobs.download_blob(layer, store, on_hashed=on_hashed)
                    os.chmod(blobs.blob_path(layer.digest), READ_ONLY)
                else:
                    _copy_into(store, layer, blobs.blob_path(layer.digest), on_hashed)

        return fetch

    def _table_fetch(self, store: RangedBlobSource, layer: Descriptor, chunks: TableOf,
                     fill: Fill) -> Callable[[Frontier], None]:
        """The fetch into the layer file named by the table's content key, each chunk checked
        with the table's hash as the in-order hash reaches it (one hash of each byte, not the
        table's and SHA-256's): found only by readers whose manifest binds the same table."""
        key, target = fill.table_key, fill.final
        assert key is not None

        def table_hasher() -> TableHasher:
            hasher = TableHasher(*chunks)  # a new one each time the download starts over
            fill.set_hasher(hasher)
            return hasher

        def fetch(on_hashed: Frontier) -> None:
            # the cache's lock: another process filling the same layer file waits, then finds it
            with flocked(self.cache.locks / f"layer-{key}.lock"):
                if self._layer_file(key, layer.size) is not None:
                    return
                download(target, layer, store, on_hashed=on_hashed, hasher_for=table_hasher)
                os.chmod(target, READ_ONLY)

        return fetch

    async def wait(self, layer: Descriptor, chunks: TableOf | None = None) -> Path | None:
        """Wait out a fetch of ``layer`` in progress; then the cache's copy, if any."""
        for _ in range(2):
            event = self._filling.get(layer.digest)
            if event is None:
                break
            await event.wait()
        return self.cached(layer, chunks)

    async def fill(self, store: Store, manifest: Descriptor, layer: Descriptor) -> Path:
        """Fetch ``layer`` into the cache (verified) unless there; its path."""
        found = await self.wait(layer)
        if found is not None:
            return found
        event = self._claim(layer)
        try:
            from ocibridge.cache.blobsource import CacheSource

            source = CacheSource(self.cache.blobs, self.cache.locks, store, manifest)
            await anyio.to_thread.run_sync(source.ensure, layer)
            self.fetched += len(source.fetched)
        finally:
            self._release(layer, event)
        return self.cache.blobs.blob_path(layer.digest)

    def _claim(self, layer: Descriptor) -> asyncio.Event:
        event = asyncio.Event()
        self._filling[layer.digest] = event
        return event

    def _release(self, layer: Descriptor, event: asyncio.Event) -> None:
        if self._filling.get(layer.digest) is event:
            del self._filling[layer.digest]
        event.set()


def _ranged(store: Store, chunks: TableOf | None) -> TableOf | None:
    """``chunks`` where a table checks the fetch (a registry's, by parts); a store that sends
    whole blobs only (a layout) is read and checked whole."""
    return chunks if isinstance(store, RangedBlobSource) else None


def _copy_into(store: Store, layer: Descriptor, final: Path, on_hashed: Frontier) -> None:
    """``layer`` from a store that sends whole blobs (a layout) into the cache at ``final``:
    written and hashed as read, each step reported (``on_hashed``), renamed read-only into
    place only once its digest matched (a mismatch raises, and the file is removed)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=final.parent)
    staged: Path | None = Path(name)
    try:
        reader = store.open_blob(layer)
        try:
            checked = verified(reader, layer.digest, layer.size)
            at = 0
            while chunk := checked.read(CHUNK):
                view = memoryview(chunk)
                while view:
                    written = os.pwrite(fd, view, at)
                    view = view[written:]
                    at += written
                on_hashed(fd, at)
            checked.verify()
        finally:
            reader.close()
        os.fchmod(fd, READ_ONLY)
        assert staged is not None
        os.replace(staged, final)
        staged = None
    finally:
        os.close(fd)
        if staged is not None:
            with contextlib.suppress(FileNotFoundError):
                staged.unlink()
