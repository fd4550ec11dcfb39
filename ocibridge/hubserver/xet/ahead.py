"""A Xet file built while its xorbs arrive: hf_xet sends a file's xorbs in order
before the shard that names the file, so serve builds the file ahead of the shard from each xorb
as it is verified: its chunk table made and its bytes sent to the registry as they are read from
the xorbs (its SHA-256 made as it is sent, :mod:`..uploads.xetassembly`), instead of all of it after
the shard. Sent, not written: the xorbs are the one copy on serve's disk, and the file taken is
staged as held by the registry (:meth:`.Staging.commit_held`). Where there is no registry to
send to (or the file is small, and its shard came first) it is written to a file, as before.

Nothing is taken on trust for it. The order guessed is the order the xorb uploads began; what is
built is only the bytes of xorbs verified as any is (:meth:`.upload.XetUpload.xorb`); and the
shard decides: a file whose segments are exactly the xorbs built, each whole, in that order, and
whose Xet hash (of the chunk hashes each xorb was verified with) and SHA-256 (of the bytes
sent, or written) are the ones the shard names, is taken as built. Anything else (other xorbs, another
order, a part of a xorb, a hash that differs, a xorb refused) discards what was built, cuts the
registry upload before its end, and the shard's files are rebuilt from the kept xorbs as before.
An upload its preupload announced as several files is not built ahead at all (:mod:`.announced`):
hf_xet packs their chunks into shared xorbs, so its stream is never one file.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, cast

from ocibridge.chunks.chunking import ChunkHasher
from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE, PUSH_THRESHOLD
from ocibridge.core.fsutil import writev_all
from ocibridge.core.pagecache import let_go
from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.guard import LFS_UPLOAD_MAX
from ocibridge.hubserver.uploads.relay import RELAY_MIN, STALL, take_parts
from ocibridge.hubserver.uploads.xetassembly import IngestFor
from ocibridge.hubserver.xet import merkle
from ocibridge.hubserver.xet.announced import Announced
from ocibridge.hubserver.xet.chunklist import ChunkList
from ocibridge.hubserver.xet.shards import BadUpload, FileEntry
from ocibridge.hubserver.xet.xorbbatches import chunk_batches, gathered_batches

if TYPE_CHECKING:
    from ocibridge.stores.base import Ingesting

log = logging.getLogger("ocibridge.hubserver")

#: seconds a shard waits for the build to reach the last xorb it names (it is verified already)
CATCH_UP = 300.0
#: a xorb's chunks (~64 KiB each) are read this many bytes at a time, through one buffer, then
#: sent (or written): one read per batch, not per chunk, and no new memory per batch (a fresh
#: 4 MiB each time cost a page fault a page: ~1 s of the build's CPU a GiB)
BATCH = 4 * 1024 * 1024
#: a xorb to build and its chunks to build (``None``: to its end)
_Part = tuple[bytes, int, "int | None"]


@dataclass(frozen=True)
class Built:
    """A file built ahead and found to be the one a shard names: written at ``path``, or (None)
    held by the registry, sent there as it was built."""

    path: Path | None
    sha256: str
    chunks: tuple[str, ...] | None
    size: int


@dataclass
class _Stream:
    """One repository's xorbs, in the order their uploads began, and the file built of them."""

    path: Path
    order: list[bytes] = field(default_factory=list)
    # the chunks of the xorbs verified and not built yet (36 bytes a chunk), and the count and
    # bytes of every one verified: a xorb built whole goes into ``tree`` and leaves ``verified``,
    # so what is held does not grow with the file
    verified: dict[bytes, ChunkList] = field(default_factory=dict)
    whole: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    tree: merkle.Tree = field(default_factory=merkle.Tree)  # the Xet hash of the xorbs built whole
    built: int = 0  # xorbs of ``order`` written out
    size: int = 0
    dead: str | None = None  # why what is built is not taken
    closed: bool = False  # a shard came: nothing more is added
    last: tuple[int, int] | None = None  # the chunks of the last xorb the shard's file holds
    ended: bool = False  # the build and its relay are over: sha256 and table are final
    sha256: str | None = None
    table: tuple[str, ...] | None = None
    relayed: bool = False  # sent to the registry as built, no file written
    announced: int | None = None  # the size of the one file its preupload named (announced.py)


class Ahead:
    """The streams being built, one per repository (the module's docstring)."""

    def __init__(self, xorbs: Path, tmp: Path, ingest: IngestFor | None, limit: int,
                 announced: Announced | None = None) -> None:
        self.xorbs, self.tmp, self.ingest, self.limit = xorbs, tmp, ingest, limit
        self.announced = announced or Announced()  # uploads of several files: none built ahead
        self._cond = threading.Condition()
        self._streams: dict[str, _Stream] = {}

    # -- what the xorb route tells ------------------------------------------------------------
    def started(self, repo_id: str, xorb: bytes) -> None:
        """An upload of ``xorb`` for ``repo_id`` began (the file's next xorb, as guessed). The
        build is woken: a xorb verified before it is whole now (:meth:`_ready`), and is built
        while this one arrives, not once it is verified (hf_xet sends its first xorbs one at a
        time: the registry's upload began a xorb's arrival later, ~0.3 s a publish). None is
        begun for an upload announced as several files."""
        if self.announced.several(repo_id):
            return
        with self._cond:
            stream = self._streams.get(repo_id)
            if stream is None or stream.closed or stream.dead is not None:
                stream = self._streams[repo_id] = _Stream(self.tmp / f"ahead-{uuid.uuid4().hex}",
                                                          announced=self.announced.size(repo_id))
                threading.Thread(target=self._build, args=(repo_id, stream), name="xet-ahead", daemon=True).start()
            stream.order.append(xorb)
            self._cond.notify_all()

    def verified(self, repo_id: str, xorb: bytes, chunks: ChunkList | None) -> None:
        """``xorb`` is kept, its chunks' hashes and lengths ``chunks`` (None: it was refused)."""
        with self._cond:
            stream = self._streams.get(repo_id)
            if stream is None or stream.closed or xorb not in stream.order:
                return
            if chunks is None:
                stream.dead = stream.dead or "a xorb was refused"
            else:
                stream.verified[xorb] = chunks
                stream.whole[xorb] = (len(chunks), chunks.total())
            self._cond.notify_all()

    # -- the shard ------------------------------------------------------------------------------
    def relaying(self, repo_id: str, files: list[FileEntry]) -> tuple[bytes, bytes | None] | None:
        """The file of ``files`` (its Xet hash and SHA-256) whose bytes are being sent to the
        registry as its xorbs came, by its xorbs alone: a guess, before :meth:`take` checks it,
        of the file that needs no room on serve's disk (None: none is sent)."""
        with self._cond:
            stream = self._streams.get(repo_id)
            if stream is None or not stream.relayed or stream.dead is not None or stream.closed:
                return None
            order = sorted(stream.order)
            entry = next((e for e in files if sorted(seg.xorb for seg in e.segments) == order), None)
            return None if entry is None else (entry.xet_hash, entry.sha256)

    def take(self, repo_id: str, files: list[FileEntry]) -> tuple[FileEntry, Built] | None:
        """The file of ``files`` built ahead for ``repo_id``, checked as the module says, or None
        (what was built is then dropped and its registry upload cut)."""
        self.announced.shard_came(repo_id)
        with self._cond:
            stream = self._streams.pop(repo_id, None)
            if stream is None:
                return None
            entry = next((e for e in files if self._reordered(e, stream) and self._is_stream(e, stream)), None)
            if entry is None:
                stream.dead = stream.dead or "the shard names other bytes"
            elif entry.sha256 is None:  # its upload is cut: no SHA-256 to check it against
                stream.dead = stream.dead or "the shard names no SHA-256 for it"
            elif not self._cond.wait_for(lambda: stream.dead is not None or stream.built == len(stream.order) - 1,
                                         CATCH_UP):
                stream.dead = "the build did not catch up"
            elif stream.dead is None:  # the build waits for the tail: the tree is this thread's now
                tail = entry.segments[-1]
                chunks = stream.verified.get(tail.xorb)
                if chunks is None:
                    stream.dead = "its last xorb came twice"
                else:
                    stream.tree.extend(chunks[tail.first:tail.end])  # the xorbs built whole are in it
                    if stream.tree.file_hash() != entry.xet_hash:
                        stream.dead = "not the Xet hash the shard names"  # before the registry upload ends
                    stream.last = (tail.first, tail.end)
            stream.closed = True
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: stream.ended, CATCH_UP + STALL):
                stream.dead = stream.dead or "the build did not end"  # the shard's files are rebuilt
                log.warning("%s: the build ahead of the shard did not end: its files are rebuilt", repo_id)
                return None
            if entry is not None and stream.dead is None and entry.sha256 is not None:
                if stream.sha256 == merkle.hex_of(entry.sha256):
                    return entry, Built(None if stream.relayed else stream.path, stream.sha256, stream.table,
                                        stream.size)
                stream.path.unlink(missing_ok=True)
            log.info("%s: the file built ahead of the shard is not taken (%s): its files are rebuilt", repo_id,
                     stream.dead or "not the SHA-256 the shard names")
            return None

    @staticmethod
    def _reordered(entry: FileEntry, stream: _Stream) -> bool:
        """Put the xorbs not written yet in the order ``entry`` names them (uploads begun at once
        may reach serve in another order), when it names the stream's xorbs and agrees with what
        was written (and the one being written); False when it does not."""
        names = [seg.xorb for seg in entry.segments]
        at = min(stream.built + 1, len(names))
        if sorted(names) != sorted(stream.order) or names[:at] != stream.order[:at]:
            return False
        stream.order = names
        return True

    @staticmethod
    def _is_stream(entry: FileEntry, stream: _Stream) -> bool:
        """Whether ``entry``'s segments are the stream's xorbs in order, each whole but the last,
        which may be part of its xorb (hf_xet puts the tail of a large file and small files
        together in the last xorb)."""
        if [seg.xorb for seg in entry.segments] != stream.order:
            return False
        *before, tail = entry.segments
        for seg in before:
            if seg.xorb not in stream.whole or (seg.first, seg.end, seg.size) != (0, *stream.whole[seg.xorb]):
                return False
        chunks = stream.verified.get(tail.xorb)  # not built yet: it has no xorb after it
        return chunks is not None and tail.end <= len(chunks) and tail.size == chunks.total(tail.first, tail.end)

    # -- the build ------------------------------------------------------------------------------
    def _ready(self, stream: _Stream) -> bool:
        """Whether the build may go on: a xorb verified with another begun after it, or ending
        before the file announced does (so whole either way), or the last one with the part of it
        the shard names, or the end."""
        k = stream.built
        if stream.dead is not None or stream.closed:
            return True
        if len(stream.order) <= k or stream.order[k] not in stream.whole:
            return False
        inside = stream.announced is not None and stream.size + stream.whole[stream.order[k]][1] < stream.announced
        return inside or len(stream.order) > k + 1

    def _next(self, stream: _Stream) -> _Part | None:
        """The next xorb to write and its chunks to write (``None``: to its end); None: over."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._ready(stream), STALL):
                stream.dead = "no xorb nor shard came"
            k = stream.built
            if stream.dead is not None:
                return None
            if not stream.closed:
                return stream.order[k], 0, None
            if stream.last is not None and k == len(stream.order) - 1:
                return stream.order[k], *stream.last
            return None

    def _build(self, repo_id: str, stream: _Stream) -> None:
        table = ChunkHasher(DEFAULT_CHUNK_SIZE, threaded=False)
        sha: str | None = None
        try:
            part = self._next(stream)  # nothing is made before the first verified xorb
            store = self._relayed_to(repo_id, stream, part)
            batches = self._batches(stream, part)
            if store is not None:  # the registry upload reads the xorbs, on this thread
                pulled = _Pulled(batches, table, partial(self._settled, stream))
                got, size = store.ingest_blob(cast(BinaryIO, pulled))  # sent as its batches are
                sha = got.removeprefix("sha256:") if size == stream.size else None
            elif part is not None:
                sha = self._write(stream, batches, table)
        except Exception as e:  # noqa: BLE001 - whatever it is, the shard must not wait for it
            if not isinstance(e, (OSError, BadUpload, OcibridgeError)):
                log.warning("%s: the build ahead of the shard failed: %r", repo_id, e)
            with self._cond:
                stream.dead = stream.dead or str(e) or type(e).__name__
                self._cond.notify_all()
        self._end(stream, sha, table)

    def _batches(self, stream: _Stream, part: _Part | None) -> Iterator[list[memoryview]]:
        """The file's bytes, xorb after xorb as each may be built (:meth:`_next`), a batch of
        chunks at a time: views of one buffer, read into again for the next batch."""
        buf = bytearray(BATCH)  # every xorb is read into this one buffer: no fresh memory a batch
        written = 0
        previous: Path | None = None  # the xorb built before the last one
        while part is not None:
            xorb, first, end = part
            with self._cond:
                checked = stream.verified.get(xorb)  # its chunks' lengths, as its check found them
            with open(self.xorbs / merkle.hex_of(xorb), "rb", buffering=0) as f:
                reading = (gathered_batches(f.fileno(), checked.lengths(), end, buf) if checked is not None
                           and first == 0 else chunk_batches(f.fileno(), first, end, buf))
                for batch in reading:
                    written += sum(len(data) for data in batch)
                    if written > LFS_UPLOAD_MAX:  # the largest file serve takes, as over LFS
                        raise BadUpload("larger than a file serve takes")
                    yield batch
                let_go(f.fileno())  # read: its writeback begun (core/pagecache.py)
            if previous is not None:  # written back by now: all of it goes
                with contextlib.suppress(OSError), open(previous, "rb") as f:
                    let_go(f.fileno())
            previous = self.xorbs / merkle.hex_of(xorb)
            if end is None:  # built whole: its chunks go into the tree, and are let go
                with self._cond:
                    chunks = stream.verified.pop(xorb, None)
                if chunks is None:
                    raise BadUpload("a xorb came twice in the stream")
                stream.tree.extend(chunks)
            with self._cond:
                stream.size = written
                stream.built += 1
                self._cond.notify_all()
            part = self._next(stream)

    def _write(self, stream: _Stream, batches: Iterator[list[memoryview]], table: ChunkHasher) -> str:
        """The file written out (no registry to send it to, or small): its SHA-256."""
        digest = hashlib.sha256()
        written = 0
        self.tmp.mkdir(parents=True, exist_ok=True)
        with stream.path.open("xb", buffering=0) as out:
            for batch in batches:
                written += sum(len(data) for data in batch)
                if written > self.limit:  # on serve's disk (a relayed file is not: no bound here)
                    raise BadUpload("past the staging budget")
                writev_all(out.fileno(), batch)
                for data in batch:
                    table.update(data)
                    digest.update(data)
        return digest.hexdigest()

    def _relayed_to(self, repo_id: str, stream: _Stream, part: _Part | None) -> Ingesting | None:
        """Where the file is sent as it is built, instead of written: the registry, when there
        is one, and the file is large (more xorbs follow, or its part of the one xorb is); a
        small file goes with the commit's push, as an LFS one does."""
        store = self.ingest(repo_id) if part is not None and self.ingest is not None else None
        if store is None or part is None:
            return None
        with self._cond:
            xorb, first, end = part
            small = end is not None and stream.closed and stream.verified[xorb].total(first, end) < RELAY_MIN
            stream.relayed = not small
        return store if stream.relayed else None

    def _settled(self, stream: _Stream) -> str | None:
        """Once the shard came (or none will): None when it takes what was built, else why not."""
        with self._cond:
            if not self._cond.wait_for(lambda: stream.closed or stream.dead is not None, CATCH_UP):
                stream.dead = stream.dead or "no shard came"
            return stream.dead

    def _end(self, stream: _Stream, sha: str | None, table: ChunkHasher) -> None:
        """The SHA-256 and table of what was built, for :meth:`take`; or, not taken, the file
        dropped (a registry upload not taken was cut before its end: :class:`_Pulled`)."""
        keep = self._settled(stream) is None
        chunks = table.finish() if keep and stream.size >= PUSH_THRESHOLD else None
        if not keep or sha is None:
            with contextlib.suppress(OSError):
                stream.path.unlink()
        with self._cond:
            stream.sha256, stream.table = (sha, chunks) if keep else (None, None)
            if stream.sha256 is None:
                stream.dead = stream.dead or "the relay failed"
            stream.ended = True
            self._cond.notify_all()


class _Pulled(io.RawIOBase):
    """The file's bytes as the registry upload takes them (:meth:`.Ingesting.ingest_blob`):
    the xorbs' batches themselves (:class:`.streams.Batched`: a registry's upload sends the
    views as they are), or, read, copied from them into its reads; its chunk table made of
    them either way. At the end it waits for the shard: taken, the upload ends (and its digest
    is given); not, the read fails, so the upload is cut before its end and the registry makes
    no blob."""

    def __init__(self, batches: Iterator[list[memoryview]], table: ChunkHasher,
                 settled: Callable[[], str | None]) -> None:
        super().__init__()
        self._batches, self._table, self._settled = batches, table, settled
        self._parts: deque[memoryview] = deque()
        self._over = False  # no batch left: the next read settles

    def readable(self) -> bool:
        return True

    def batches(self) -> Iterator[list[memoryview]]:
        for batch in self._batches:
            for data in batch:
                self._table.update(data)
            yield batch
        self._over = True
        self._settle()

    def _settle(self) -> None:
        why = self._settled()
        if why is not None:
            raise OSError(f"not the shard's file: {why}")

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        taken = 0
        while taken < len(view):
            if not self._parts:
                batch = None if self._over else next(self._batches, None)  # the views before it are copied
                if batch is None:
                    self._over = True
                    if taken:
                        break
                    self._settle()
                    return 0
                self._parts.extend(batch)
                continue
            taken += take_parts(self._parts, view[taken:])
        self._table.update(view[:taken])
        return taken
