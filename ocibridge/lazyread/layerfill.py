"""A sequential whole read of a layer, served from one pull-style fetch into the chunk store.

A reader that goes from the first byte on through a large layer (a copy, a checksum, a
loader reading a whole file) gains nothing from chunk-by-chunk Range requests: every chunk
becomes a Python object, crosses threads, is written later from a cold cache and copied
again into the read's result. Such a read costs what a pull costs when the pull engine
(``stores.partial.download``: parts in flight into pooled buffers, written at once, hashed in
order) fetches the layer into the store's layer file, checking each chunk against the table
as the in-order hash reaches it (``chunks.tablehash``); reads wait for the checked prefix to
cover them and are answered from the file. Bytes past the checked prefix are never returned.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

from ocibridge.chunks.chunktable import LayerChunks
from ocibridge.chunks.tablehash import TableHasher
from ocibridge.core.fsutil import pread_full, pread_into
from ocibridge.errors import DigestMismatch, OcibridgeError
from ocibridge.lazyread.stall import StallBound
from ocibridge.oci.models import Descriptor
from ocibridge.stores.partial import download, partial_path
from ocibridge.stores.ranged import RangedBlobSource

#: layers from this size get a fill for a whole read (below it the chunk reads are as quick)
FILL_MIN_SIZE = 64 * 1024 * 1024
#: a run of reads from byte 0 that reaches this many bytes starts the fill (an opening read
#: this long starts it at once; a run of small reads costs at most this much fetched twice).
#: Measured: at 16 MiB a cold ``cat`` of a mounted GiB spent 0.10 s of its 0.9-1.0 s on the
#: chunk reads before the fill; at 4 MiB 0.03 s (bench.mount: 0.89-0.91x pull's throughput
#: against 0.93-0.94x, alternating, quiet).
FILL_AFTER = 4 * 1024 * 1024


#: fills still fetching: stopped when the interpreter exits (an fsspec filesystem keeps its
#: files open), before the part threads are joined, or the exit would wait for the whole layer
_RUNNING: weakref.WeakSet[LayerFill] = weakref.WeakSet()


def _abandon_running() -> None:
    for fill in list(_RUNNING):
        fill._closing = True  # (its file stays at its name, for a later resume)
        fill._abandon.set()


#: fills whose failed partial file is set aside (``LayerFill._put_aside``): put back at exit
#: too, for a reader never closed (an fsspec file), or the next fill could not resume it
_ASIDE: weakref.WeakSet[LayerFill] = weakref.WeakSet()


@atexit.register
def _put_back_all() -> None:
    for fill in list(_ASIDE):
        fill._put_back()


# threading's own exit hooks run before atexit's, and join the part threads: this one must
# run first (hooks run last-registered first; concurrent.futures registered when imported).
# threading._register_atexit is what concurrent.futures itself uses (Python 3.9 on)
threading._register_atexit(_abandon_running)  # type: ignore[attr-defined]  # private: typeshed omits it


class FillFailed(OcibridgeError):
    """The fill could not bring the layer (not a wrong byte: the chunk reads take over)."""


class LayerFill:
    """One layer on its way into the chunk store's layer file ``target``; thread-safe."""

    def __init__(self, source: RangedBlobSource, layer: Descriptor, chunks: LayerChunks,
                 chunk_size: int, target: Path, on_bytes: Callable[[int], None] | None = None,
                 where: str = "the registry"):
        self.source = source
        self.where = where  # the source, as errors name it
        self.layer = layer
        self.chunks = chunks
        self.chunk_size = chunk_size
        self.target = target
        self._changed = threading.Condition()
        self._hasher: TableHasher | None = None
        self._verified = 0  # checked prefix of the current attempt's file
        self._fd: int | None = None  # our own descriptor of the file being filled
        self._error: BaseException | None = None
        self._done = False
        self._abandon = threading.Event()
        #: the partial file, renamed out of other downloads' reach when this fill failed
        self._set_aside: Path | None = None
        self._closing = False
        self._on_bytes = on_bytes
        self._thread = threading.Thread(target=self._run, name="layer-fill", daemon=True)
        self._started = time.monotonic()  # (again when started)

    def start(self) -> LayerFill:
        self._started = time.monotonic()
        _RUNNING.add(self)
        self._thread.start()
        return self

    # -- the fetching thread ---------------------------------------------------------------
    def _new_hasher(self) -> TableHasher:
        with self._changed:
            self._hasher = TableHasher(self.chunks, self.chunk_size)
            self._verified = 0  # a new attempt from byte 0: nothing of the last one stands
        return self._hasher

    def _on_hashed(self, fd: int, _upto: int) -> None:
        with self._changed:
            if self._fd is None:
                self._fd = self._own_descriptor(fd)  # valid after the download renames or closes its own
            if self._hasher is not None:
                self._verified = self._hasher.verified
            self._changed.notify_all()

    def _own_descriptor(self, fd: int) -> int:
        """The file ``fd`` names, opened anew: not ``os.dup``, whose descriptor shares the
        download's open file and so its ``flock`` (held while the reader stays open, another
        reader's fill of the layer would wait for that reader's close, not the fill's end).
        Opened by the partial file's name while the download holds its lock (nobody renames
        it meanwhile), and checked to be the same file."""
        own = os.open(partial_path(self.target.parent, self.layer.digest), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        mine, theirs = os.fstat(own), os.fstat(fd)
        if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
            os.close(own)
            raise FillFailed(f"{self.layer.digest}: the partial file was replaced while it was filled")
        return own

    def _run(self) -> None:
        error: BaseException | None = None
        try:
            download(self.target, self.layer, self.source, on_bytes=self._on_bytes, on_hashed=self._on_hashed,
                     hasher_for=self._new_hasher, abandon=self._abandon, on_failure=self._put_aside)
            with contextlib.suppress(OSError):
                os.chmod(self.target, 0o444)  # read-only, as the cache's other layer files
        except BaseException as e:  # noqa: BLE001 - handed to the readers waiting, who raise it
            error = e
        with self._changed:
            if error is None and self._fd is None:
                # another process filled it while this one waited for its lock: the store's
                # reads (checked chunk by chunk) answer from here on
                error = FillFailed(f"{self.layer.digest}: filled by another reader")
            elif error is None:
                self._verified = self.layer.size
            self._error, self._done = error, True
            self._changed.notify_all()
        _RUNNING.discard(self)

    def _put_aside(self, partial: Path) -> None:
        """(the download failed, its lock still held) Rename the partial file out of reach, so
        that no other process's download resumes it, rewriting bytes, while a reply this fill
        gave (``stable``: a descriptor libfuse reads after the answer) may still be read;
        :meth:`close` puts it back. Not when closing: that comes after every reply. (Not
        ``_abandon``: the download sets it too, to stop its parts when one fails.)"""
        if self._closing:
            return
        aside = partial.with_name(f"{partial.name}.failed-{os.getpid()}-{id(self):x}")
        with contextlib.suppress(OSError):  # (gone: a layer that did not match, removed)
            os.rename(partial, aside)
            with self._changed:
                self._set_aside = aside
            _ASIDE.add(self)

    def _put_back(self) -> None:
        """The partial file set aside back in place for a later resume, unless another has
        begun one meanwhile (then it is removed)."""
        with self._changed:
            aside, self._set_aside = self._set_aside, None
        _ASIDE.discard(self)
        if aside is None:
            return
        with contextlib.suppress(OSError):
            os.link(aside, partial_path(self.target.parent, self.layer.digest))
        with contextlib.suppress(OSError):
            os.unlink(aside)

    # -- readers -----------------------------------------------------------------------------
    def read(self, start: int, end: int, stall: StallBound | None = None) -> bytes:
        """Bytes ``[start, end)`` once the checked prefix covers them. Raises DigestMismatch
        for a layer that does not match its table, FillFailed when the fill stopped for any
        other reason (the caller reads by chunks instead), Stalled when the fill heard nothing
        of the layer within ``stall``'s bound (since it started, or its last bytes)."""
        with self._changed:
            fd = self._checked(end, stall)
            # under the lock: a download that starts over from byte 0 makes its new hasher
            # (and so writes anything) only after this read
            data = pread_full(fd, end - start, start)
        if len(data) != end - start:
            raise FillFailed(f"{self.layer.digest}: the filled file is shorter than its checked prefix")
        return data

    def read_into(self, start: int, end: int, into: memoryview, stall: StallBound | None = None) -> None:
        """:meth:`read`, written into ``into`` (``end - start`` long): one copy, from the file."""
        with self._changed:
            fd = self._checked(end, stall)
            got = pread_into(fd, into, start)  # (under the lock, as read's)
        if got != end - start:
            raise FillFailed(f"{self.layer.digest}: the filled file is shorter than its checked prefix")

    def stable(self, end: int, stall: StallBound | None = None) -> int:
        """A descriptor of the file whose bytes up to ``end`` are checked and stay as they are
        for as long as this fill is open, once the checked prefix covers them (raises as
        :meth:`read`): so a reply may name the descriptor and be read after this returns.
        Nothing writes checked bytes again: the download never rewrites its checked prefix, a
        filled file is renamed into place and never written, and a failed fill's file is
        renamed out of other downloads' reach while still locked (``_put_aside``)."""
        with self._changed:
            return self._checked(end, stall)

    def _checked(self, end: int, stall: StallBound | None) -> int:
        """(lock held) Wait until the checked prefix reaches ``end``; the file's descriptor."""
        while self._verified < end and not self._done:
            left = None if stall is None else stall.left(stall.since(self.layer.digest, self._started))
            if stall is not None and left is not None and left <= 0:
                raise stall.stalled(self.where)
            self._changed.wait(left)
        if self._verified < end or self._fd is None:
            raise self._failure()
        return self._fd

    def _failure(self) -> BaseException:
        error = self._error
        hasher = self._hasher
        # a wrong chunk is the source's only when the download failed on it: a resumed attempt
        # also fails on a damaged partial file, and goes on (or stops for another reason)
        if hasher is not None and hasher.failed_chunk is not None and isinstance(error, DigestMismatch):
            at = hasher.failed_chunk * self.chunk_size
            return DigestMismatch(
                f"{self.where}: chunk {hasher.failed_chunk} of {self.layer.digest} (bytes {at}-"
                f"{min(at + self.chunk_size, self.layer.size)}) does not match its digest in the chunk table: "
                "refusing the range")
        if isinstance(error, DigestMismatch):
            return error
        if isinstance(error, FillFailed):
            return error
        return FillFailed(f"{self.layer.digest}: {error}" if error is not None else f"{self.layer.digest}: stopped")

    @property
    def failed(self) -> bool:
        with self._changed:
            return self._done and self._verified < self.layer.size

    def close(self) -> None:
        """Stop the fetch if it still runs (what it wrote stays for a later resume)."""
        self._closing = True
        self._abandon.set()
        if self._thread.is_alive():
            self._thread.join()
        with self._changed:
            fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._put_back()

