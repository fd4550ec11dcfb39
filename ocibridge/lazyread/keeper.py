"""Keeping the verified chunks of one layer in a chunk store, in the shape that costs least.

Chunks read here and there go to chunk files, one per chunk. While every read of the open file
continues one run from its first byte, chunks go instead into one staged whole-layer file at
their offsets: committed when its last chunk is in, and when the run ends early (a seek, or the
file closed) its first chunks up to the first gap are committed as a *prefix* layer file, the
few read ahead past the gap going to chunk files. So a whole read writes one file (1,025 chunk
files cost more than the read of a GiB) and an interrupted one costs a rename, not a copy.

Reads use whatever the store holds: a layer file (whole, or a prefix of the layer's chunks),
the blob a pull into the model cache left, then chunk files; every chunk read back is checked
against the table, and the file that gave a wrong one is dropped (never the model cache's
blob, which is not ours). The layer file is named by ``LayerChunks.content_key``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ocibridge.chunks.chunktable import LayerChunks
from ocibridge.chunks.delta import LocalChunks
from ocibridge.lazyread.chunkstore import ChunkStore, LayerStaging, StoredLayer
from ocibridge.oci.models import Descriptor

#: verified chunks waiting to be written (writes lag the reads by at most this, then fetches
#: wait); one thread writes them (four were no faster than one on a whole 1 GiB read, load 5-7)
#: and only it touches the staged layer file
STORE_BACKLOG = 32

#: a verified chunk; a bytearray as received (never changed after), to save a copy
Chunk = bytes | bytearray

#: keepers not closed yet: at exit their runs end too, so a script that never closes its
#: files (fsspec keeps them open) leaves a prefix layer file, not a dead temporary one
_OPEN: weakref.WeakSet[ChunkKeeper] = weakref.WeakSet()


@atexit.register
def _close_open_keepers() -> None:
    for keeper in list(_OPEN):
        with contextlib.suppress(Exception):
            keeper.close()


class ChunkKeeper:
    """The chunk store's side of one open layer; thread-safe."""

    def __init__(self, store: ChunkStore, layer: Descriptor, chunks: LayerChunks, chunk_size: int):
        self.store = store
        self.layer = layer
        self.chunks = chunks
        self.chunk_size = chunk_size
        self.key = chunks.content_key(chunk_size)
        self._count = len(chunks.chunks)
        self._lock = threading.Lock()
        self._backlog = threading.BoundedSemaphore(STORE_BACKLOG)
        self._writer: ThreadPoolExecutor | None = None
        self._whole: StoredLayer | None = None  # a layer file (or the model cache's blob)
        self._whole_is_blob = False
        self._covered = 0  # chunks 0 .. covered-1 are in it
        self._looked = False
        self._from_start = True  # every read so far continues one run from chunk 0
        self._others: LocalChunks | None = None  # chunks other cached blobs hold (an earlier version's)
        self._staging: LayerStaging | None = None  # (the writer thread's alone, as _staged)
        self._staged: set[int] = set()
        _OPEN.add(self)

    # -- reading back ------------------------------------------------------------------------
    def has(self, index: int) -> bool:
        """Whether the store holds chunk ``index`` (cheap: decides load or fetch)."""
        _, covered = self._whole_view()
        return (index < covered or self.store.has(self.chunks.chunk_id(index))
                or self._other_places().has(self.chunks.chunks[index]))

    def holds_any(self) -> bool:
        """Whether the store holds any chunk of the layer (a layer file, chunk files, or other
        blobs: an earlier version's), so that reading chunk by chunk moves less."""
        _, covered = self._whole_view()
        if covered:
            return True
        others = self._other_places()
        return any(self.store.has(self.chunks.chunk_id(i)) or others.has(d) for i, d in enumerate(self.chunks.chunks))

    def load(self, index: int) -> Chunk | None:
        """Chunk ``index`` from the store, checked against the table; None if it is not there
        or was damaged (the file that held it is dropped)."""
        expected, name = self.chunks.chunks[index], self.chunks.chunk_id(index)
        whole, covered = self._whole_view()
        if whole is not None and index < covered:
            data = whole.read_at(*self._extent(index))
            if data is not None and self.chunks.matches(index, data):
                self.keep(index, data, fetched=False)
                return data
            self._drop_whole(whole)
        data = self.store.get(name)
        if data is not None and self.chunks.matches(index, data):
            self.keep(index, data, fetched=False)
            return data
        if data is not None:
            self.store.drop(name)
        others = self._other_places()
        data = others.read(expected, self._extent(index)[1]) if others.has(expected) else None
        if data is not None and self.chunks.matches(index, data):
            self.keep(index, data, fetched=False)
            return data
        if data is not None:
            others.damaged(expected)
        return None

    def _other_places(self) -> LocalChunks:
        """(once per open layer) The chunks of this layer other blobs of the store hold."""
        with self._lock:
            if self._others is None:
                self._others = self.store.elsewhere(self.chunks)
            return self._others

    def _whole_view(self) -> tuple[StoredLayer | None, int]:
        with self._lock:
            if not self._looked:
                self._looked = True
                self._open_whole()
            return self._whole, self._covered

    def _open_whole(self) -> None:
        """(lock held) The store's layer file, else its blob of this layer, and how many chunks
        from the first it covers; a file longer than the layer is not used."""
        if self._whole is not None:
            self._whole.close()
        whole, is_blob = self.store.open_layer(self.key), False
        if whole is None:
            whole, is_blob = self.store.open_blob(self.layer.digest), True
        covered = 0
        if whole is not None:
            size = whole.size()
            if size == self.layer.size:
                covered = self._count
            elif size < self.layer.size and not is_blob:
                covered = size // self.chunk_size
            if not covered:
                whole.close()
                whole = None
        self._whole, self._whole_is_blob, self._covered = whole, is_blob, covered

    def _drop_whole(self, whole: StoredLayer) -> None:
        with self._lock:
            if self._whole is not whole:
                return  # dropped already, by another span
            self._whole, self._covered = None, 0
            whole.close()
            if self._whole_is_blob:
                return  # the model cache's: left to it (snapshots link it), no longer used here
        self.store.drop_layer(self.key)

    def _extent(self, index: int) -> tuple[int, int]:
        at = index * self.chunk_size
        return at, min(at + self.chunk_size, self.layer.size) - at

    # -- what the reader does ----------------------------------------------------------------
    def note_read(self, in_run: bool) -> None:
        """A read that is ``in_run`` (it opens or continues the run from chunk 0, as the
        reader counts it), or not: that ends the run from chunk 0."""
        if in_run:
            return
        with self._lock:
            if not self._from_start:
                return
            writer = self._writer
            if writer is None:  # nothing kept yet: nothing to commit
                self._from_start = False
                return
        # The run ends on the writer thread, after the chunks read before this one are written
        # (it is one thread: they are queued ahead), so every one of them is in the prefix; the
        # flag flips there too (ending it here raced them into chunk files: a prefix of 2 of 3)
        with contextlib.suppress(RuntimeError):  # (closing: close ends the run itself)
            writer.submit(self._end_run)

    # -- keeping -----------------------------------------------------------------------------
    def keep(self, index: int, data: Chunk, *, fetched: bool) -> None:
        """Keep a verified chunk, on the writer thread (this waits while STORE_BACKLOG chunks
        are queued). ``fetched``: from the source; else from the store, and kept again only
        into a layer file being staged."""
        with self._lock:
            if not fetched and (not self._from_start or self._covered == self._count):
                return
        self._backlog.acquire()
        try:
            self._submit(functools.partial(self._keep_now, index, data, fetched))
        except BaseException:
            self._backlog.release()
            raise

    def _submit(self, work: Callable[[], None]) -> None:
        with self._lock:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(1, thread_name_prefix="chunk-store")
            self._writer.submit(work)

    def _keep_now(self, index: int, data: Chunk, fetched: bool) -> None:
        try:
            staging = self._staging_now()
            if staging is not None:
                try:
                    staging.write_at(index * self.chunk_size, data)
                except OSError:
                    self._end_run()  # the staged ones are kept as a prefix; this one below
                else:
                    self._staged.add(index)
                    if len(self._staged) == self._count:
                        self._staging, self._staged = None, set()
                        staging.commit()
                        self._reopen()
                    return
            if fetched:
                self.store.put(self.chunks.chunk_id(index), data)
        finally:
            self._backlog.release()

    def _staging_now(self) -> LayerStaging | None:
        """(writer thread) The layer file to write into, made on the run's first chunk; none
        once the run is over or when the store holds the whole layer already."""
        with self._lock:
            if not self._from_start or self._covered == self._count:
                return None
        if self._staging is None:
            self._staging = self.store.stage_layer(self.key)
            if self._staging is None:
                with self._lock:
                    self._from_start = False
        return self._staging

    def _end_run(self) -> None:
        """(writer thread) The run from chunk 0 is over: its chunks up to the first gap become
        a prefix layer file (unless the store has a longer one), those past it chunk files."""
        staging, self._staging = self._staging, None
        staged, self._staged = self._staged, set()
        with self._lock:
            self._from_start = False
        if staging is None:
            return
        prefix = 0
        while prefix in staged:
            prefix += 1
        try:
            for index in sorted(i for i in staged if i >= prefix):
                self.store.put(self.chunks.chunk_id(index), staging.read_at(*self._extent(index)))
            if prefix:
                staging.truncate(prefix * self.chunk_size)
                staging.commit()
                self._reopen()
                return
        except OSError:
            pass  # a cache that cannot write must not fail a read
        staging.discard()

    def _reopen(self) -> None:
        with self._lock:
            self._looked = False  # reads from now on see the new file

    def look_again(self) -> None:
        """Reads from now on look again for a layer file (one another reader may have made)."""
        self._reopen()

    def close(self) -> None:
        """Wait for every write; a run still open ends here (its prefix is committed). Also
        called at interpreter exit for keepers nobody closed (an fsspec filesystem keeps its
        models open), after the writer threads have drained."""
        with self._lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.shutdown(wait=True)
        self._end_run()  # (the writer is done: this thread is the only one left touching staging)
        _OPEN.discard(self)
        with self._lock:
            if self._whole is not None:
                with contextlib.suppress(OSError):
                    self._whole.close()
            self._whole, self._covered, self._looked = None, 0, False
            others, self._others = self._others, None
        if others is not None:
            others.close()
