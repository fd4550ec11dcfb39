"""Blob downloads into a file that survive interrupts and go faster than one stream.

The bytes go into a partial file beside the blob (``.ocibridge-partial-<hex>``), held under
an exclusive lock while written. Interrupted (Ctrl-C, kill -9, a dead link), the file stays;
the next run re-hashes the prefix it holds (no trust in a half-file: a wrong prefix fails the
digest, and the blob is fetched again from byte 0 once) and asks only for the rest, with
Range. Large blobs are fetched as parts in flight at once, each written at its offset, while
the digest is computed in order over the contiguous prefix as it grows, so the blob is hashed
once and verified before it is renamed to its final name. A ``.prefix`` file beside it
records how far each part got, so a rerun asks each part only for its rest (the whole blob is
still hashed from disk in order, so kept bytes are checked too). A server that ignores Range
gets one stream.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from ocibridge.core import notices
from ocibridge.core.fsutil import pwrite_all
from ocibridge.core.lockfile import open_in_dir
from ocibridge.core.smallfile import read_small
from ocibridge.core.terminal import human_size
from ocibridge.errors import DigestMismatch
from ocibridge.oci.digest import Hasher, new_hasher, split_digest
from ocibridge.oci.models import Descriptor
from ocibridge.stores.inorder_hash import BufferPool, Frontier, InOrderHash
from ocibridge.stores.part_governor import PartGovernor, PartsAbandoned
from ocibridge.stores.ranged import ByteCount, LandingReader, RangedBlobSource, RangedPlan, RangeReader


@runtime_checkable
class CheckedPrefix(Protocol):
    """A hasher that tells how many bytes from byte 0 it has checked (a chunk table's check):
    a download that fails after them starts again there, not at byte 0."""

    @property
    def verified(self) -> int: ...


PARTIAL_PREFIX = ".ocibridge-partial-"
PREFIX_SUFFIX = ".prefix"
#: Bytes asked of a reader that lands them in the file itself (one splice: a pipe's worth),
LAND_STEP = 1 << 20
#: and landed bytes handed to the hash at a time (one mapping of the file per hand-over).
LAND_BATCH = 4 << 20


_slots_lock = threading.Lock()
_slots: dict[int, threading.BoundedSemaphore] = {}


def _part_slots(parts_in_flight: int) -> threading.BoundedSemaphore:
    """Parts in flight for the whole process, not per blob: a copy of four blobs at once
    keeps ``parts_in_flight`` connections busy, not four times as many (memory stays flat)."""
    with _slots_lock:
        slots = _slots.get(parts_in_flight)
        if slots is None:
            slots = _slots[parts_in_flight] = threading.BoundedSemaphore(parts_in_flight)
        return slots


def partial_path(directory: Path, digest: str) -> Path:
    return directory / f"{PARTIAL_PREFIX}{split_digest(digest)[1]}"


def download(final: Path, desc: Descriptor, source: RangedBlobSource,
             plan: RangedPlan | None = None, on_bytes: ByteCount | None = None,
             on_hashed: Frontier | None = None, *, hasher_for: Callable[[], Hasher] | None = None,
             abandon: threading.Event | None = None, on_failure: Callable[[Path], None] | None = None) -> int:
    """Fetch ``desc`` from ``source`` into ``final`` (verified, then renamed); the bytes
    fetched over the network this time (less than the size when resumed). ``on_hashed``
    follows the prefix written and hashed (it starts again from 0 if kept bytes fail).
    ``hasher_for`` makes the check (default: the blob's digest; a chunk table's check in
    ``chunks.tablehash``); setting ``abandon`` stops the parts at their next buffer (the
    partial file stays, for a later resume) and the download raises ``PartsAbandoned``.
    ``on_failure`` is called with the partial file's path when the download fails, before its
    lock on that file is let go (no other download can touch the file yet).

    Bytes a hasher with a checked prefix (``verified``: a chunk table's) has checked are never
    written again: kept bytes that fail make the next attempt start from that prefix, not from
    byte 0 (a reader of the file may be answering from them: ``lazyread.layerfill``)."""
    plan = plan or source.ranged_plan
    partial = partial_path(final.parent, desc.digest)
    marker = partial.with_name(partial.name + PREFIX_SUFFIX)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd = open_locked(partial, abandon)  # another process on this blob: wait for it
    try:
        if final.exists() and final.stat().st_size == desc.size:
            _remove(partial, marker)
            return 0
        fetched = 0
        hasher: Hasher | None = None
        for fresh in (False, True):
            if fresh:  # what was kept did not verify: once more, from the checked prefix (else byte 0)
                os.ftruncate(fd, hasher.verified if isinstance(hasher, CheckedPrefix) else 0)
                _remove(marker)
            hasher = hasher_for() if hasher_for is not None else new_hasher(desc.digest)
            got, resumed = _fetch(fd, marker, desc, source, plan, hasher, on_bytes, on_hashed, abandon)
            fetched += got
            if hasher.hexdigest() == split_digest(desc.digest)[1]:
                # No fsync: like every other blob a layout writes, and like curl, oras and
                # Ollama. A blob cut short by a power loss is caught by its size (``exists``)
                # or by the digest every layout read checks; a fsync per blob cost 0.5-3.5 s
                # per GiB on the measured machines.
                os.replace(partial, final)
                _remove(marker)
                return fetched
            if not resumed:
                break  # the source itself sent wrong bytes
        _remove(partial, marker)
        raise DigestMismatch(f"{desc.digest}: the downloaded content has another digest")
    except BaseException:
        if on_failure is not None:
            on_failure(partial)
        raise
    finally:
        os.close(fd)


def open_locked(partial: Path, abandon: threading.Event | None = None) -> int:
    """The partial file, opened and locked. The writer waited for may have renamed the file
    (its blob; a layer file of the chunk cache has a name of its own) or removed it, and a third
    begun a new one: the file at the partial name is the one worked on, else the rename at the
    end would put in place a file this download never hashed."""
    while True:
        fd = open_in_dir(partial, os.O_RDWR | os.O_CREAT, 0o644)  # never written through a planted link
        try:
            _lock(fd, abandon)
            mine = os.fstat(fd)
            try:
                named = os.stat(partial, follow_symlinks=False)
            except FileNotFoundError:
                named = None
        except BaseException:
            os.close(fd)
            raise
        if named is not None and (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino):
            return fd
        os.close(fd)


def _lock(fd: int, abandon: threading.Event | None) -> None:
    """The partial file's lock, waited for until ``abandon`` is set (then ``PartsAbandoned``):
    a reader closed while another fills the same blob must not wait for the whole blob."""
    if abandon is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if abandon.wait(0.05):
                raise PartsAbandoned from None


def _remove(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


# -- what an earlier run left ---------------------------------------------------------------
#: The ``.prefix`` file of a ranged download: a header, then per part the bytes written,
#: each a fixed-width record updated in place (one pwrite, no lock between parts).
_HEADER = 64
_RECORD = 20


def _parts(size: int, part_size: int) -> list[tuple[int, int]]:
    return [(s, min(s + part_size, size)) for s in range(0, size, part_size)]


def _header(size: int, part_size: int) -> bytes:
    return f"ocibridge-parts {size} {part_size}".encode().ljust(_HEADER - 1) + b"\n"


def _kept(fd: int, marker: Path, size: int, parts: list[tuple[int, int]], part_size: int) -> list[int]:
    """Bytes already written of each part: from the part records of a ranged run, else (a
    single stream was writing) from the file's length."""
    on_disk = os.fstat(fd).st_size
    try:
        data = read_small(marker, _HEADER + len(parts) * _RECORD, "download record", follow=False)
    except FileNotFoundError:
        return [max(0, min(on_disk - a, b - a)) for a, b in parts]
    if not data.startswith(_header(size, part_size)):
        return [0] * len(parts)  # another plan wrote it: start over
    kept = []
    for i, (a, b) in enumerate(parts):
        record = data[_HEADER + i * _RECORD: _HEADER + (i + 1) * _RECORD].strip()
        written = int(record) if record.isdigit() else 0
        kept.append(max(0, min(written, b - a, on_disk - a)))
    return kept


# -- fetching -------------------------------------------------------------------------------
def _fetch(fd: int, marker: Path, desc: Descriptor, source: RangedBlobSource, plan: RangedPlan,
           hasher: Hasher, on_bytes: ByteCount | None,
           on_hashed: Frontier | None = None, abandon: threading.Event | None = None) -> tuple[int, bool]:
    """Bring the partial file to the whole blob, hashing it in order; (bytes fetched, whether
    bytes kept from before were used)."""
    size = desc.size
    if size == 0:
        _remove(marker)
        return 0, False
    part_size = plan.part_size if plan.parts_in_flight > 1 and size >= 2 * plan.part_size else size
    planned = parts = _parts(size, max(1, part_size))
    kept = _kept(fd, marker, size, parts, part_size)
    resumed = any(kept)
    if resumed:  # as an upload that continues says so (stores/registry/upload.py)
        held = sum(kept)
        notices.say(f"resumed {desc.digest} at {100 * held // max(1, size)}% ({human_size(held)} kept from "
                    "an earlier run)")
        if on_bytes is not None:  # the bar starts where the resume does, not at 0 %
            on_bytes(held)
    todo = [i for i, (a, b) in enumerate(parts) if kept[i] < b - a]
    first = _Stream()
    if len(parts) > 1 and todo:
        i = todo[0]
        # adaptive: one part at first, on a request for the rest of the blob (_run_parts)
        if not first.open(source, desc, parts[i][0] + kept[i], size if plan.adaptive else parts[i][1],
                          probe=True).ranged:
            first.close()  # Range ignored: one stream, after the contiguous prefix
            parts = [(0, size)]
    if len(parts) == 1:
        prefix = 0
        for (a, b), k in zip(planned, kept, strict=True):
            prefix += k
            if k < b - a:
                break
        if os.fstat(fd).st_size != prefix:
            # only when needed: ext4 flushes a file truncated to 0 when it is closed
            # (auto_da_alloc), 0.5 s per GiB written after the truncation
            os.ftruncate(fd, prefix)
        _remove(marker)  # written in order from here: the file's length is the prefix
        kept = [prefix]
    got = _run_parts(fd, marker, desc, source, plan, parts, kept, first, hasher, on_bytes, on_hashed, abandon)
    return got, resumed


@dataclass
class _Stream:
    """A worker's open request: the next byte it brings (``at``) and where it ends."""

    reader: RangeReader | None = None
    at: int = -1
    end: int = -1

    def open(self, source: RangedBlobSource, desc: Descriptor, start: int, end: int,
             probe: bool = False) -> RangeReader:
        """A request for ``[start, end)``: ``end`` at the blob's end asks for the rest of it."""
        self.reader = source.open_blob_range(desc, start, None if end == desc.size else end, probe=probe)
        self.at, self.end = start, end
        return self.reader

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None


def _run_parts(fd: int, marker: Path, desc: Descriptor, source: RangedBlobSource,
               plan: RangedPlan, parts: list[tuple[int, int]], kept: list[int],
               first: _Stream, hasher: Hasher, on_bytes: ByteCount | None,
               on_hashed: Frontier | None = None, abandon: threading.Event | None = None) -> int:
    """The missing parts, as many in flight as the governor allows, each received into a
    pooled buffer, written at its offset and its progress recorded (several parts only);
    the calling thread hashes the blob in order meanwhile (:mod:`.inorder_hash`). The bytes
    fetched."""
    ranged = len(parts) > 1
    todo = [i for i, (a, b) in enumerate(parts) if kept[i] < b - a]
    feed = InOrderHash(fd, parts, [a + k for (a, _), k in zip(parts, kept, strict=True)], hasher, on_hashed)
    if not todo:
        feed.run()
        return 0
    in_flight = plan.parts_in_flight if ranged else 1
    slots = _part_slots(plan.parts_in_flight)
    governor = PartGovernor(in_flight, plan.adaptive, tickets=len(todo))
    buffers = BufferPool(min(len(todo), in_flight) + 4)
    stop = abandon or threading.Event()  # a part failed: the others end at their next buffer
    records = open_in_dir(marker, os.O_RDWR | os.O_CREAT, 0o644) if ranged else None
    try:
        if records is not None:
            os.ftruncate(records, 0)
            os.pwrite(records, _header(desc.size, parts[0][1] - parts[0][0]), 0)
            for i, k in enumerate(kept):
                os.pwrite(records, b"%019d\n" % k, _HEADER + i * _RECORD)

        def part_on(stream: _Stream, ticket: int) -> int:
            """Part ``ticket`` on ``stream``'s connection when it stands at the part's start
            and reaches its end, else on a new request: for the rest of the blob while one
            part is allowed (the next parts may follow on it), else for the part alone."""
            i = todo[ticket]
            start, end = parts[i][0] + kept[i], parts[i][1]
            if stream.reader is not None and (stream.at != start or stream.end < end):
                stream.close()
            reader = stream.reader
            if reader is None:
                if stop.is_set():
                    raise PartsAbandoned
                reader = stream.open(source, desc, start, desc.size if not ranged or governor.one_at_a_time else end)
            got = _copy_part(fd, reader, i, start, end, records, parts[i][0], feed, buffers,
                             governor, on_bytes, stop)
            stream.at = end
            return got

        def worker(ticket: int | None, stream: _Stream) -> int:
            """Parts by ticket until none are left; while admitted, from part to part in the
            same slot (``carry_on``)."""
            fetched = 0
            try:
                while ticket is not None or (ticket := governor.admit()) is not None:
                    try:
                        with slots:
                            while ticket is not None:
                                fetched += part_on(stream, ticket)
                                ticket = governor.carry_on()  # None: the slot is left
                    except BaseException:
                        if ticket is not None:
                            governor.leave()
                        raise
                    stream.close()  # the next admission is some parts further on
                return fetched
            except BaseException as e:
                feed.fail(e)
                raise
            finally:
                stream.close()

        first_ticket = governor.admit()  # 0: the first part's request may be open already
        workers = min(in_flight, len(todo))
        with ThreadPoolExecutor(workers, thread_name_prefix="part") as pool:
            futures: list[Future[int]] = [pool.submit(worker, first_ticket, first)]
            futures += [pool.submit(worker, None, _Stream()) for _ in range(workers - 1)]
            try:
                feed.run()
                return sum(future.result() for future in futures)
            except BaseException:
                stop.set()
                governor.stop()
                for future in futures:
                    future.cancel()
                raise
    finally:
        if records is not None:
            os.close(records)


def _copy_part(fd: int, reader: RangeReader, part: int, start: int, end: int, records: int | None,
               part_start: int, feed: InOrderHash, buffers: BufferPool, governor: PartGovernor,
               on_bytes: ByteCount | None, stop: threading.Event) -> int:
    """Receive ``start``..``end`` and write it at its offset, record the part's progress, and
    hand it to the in-order hash: landed by the reader itself where it can (spliced inside the
    kernel, then hashed from the file: :class:`LandingReader`), else into pooled buffers."""
    pos = handed = start  # bytes before ``handed`` are handed to the hash
    lander = reader if isinstance(reader, LandingReader) else None
    while pos < end:
        if stop.is_set():
            raise PartsAbandoned
        n = lander.land_into(fd, pos, min(LAND_STEP, end - pos)) if lander is not None else None
        if n is None:
            lander = None
            n = _receive_buffer(fd, reader, part, pos, end, feed, buffers, stop)
            handed = pos + n
        elif not n:
            raise DigestMismatch(f"the blob ended at byte {pos}, expected {end}")
        elif pos + n - handed >= LAND_BATCH or pos + n == end:
            feed.landed(part, pos + n)
            handed = pos + n
        if records is not None:
            os.pwrite(records, b"%019d\n" % (pos + n - part_start), _HEADER + part * _RECORD)
        pos += n
        governor.count(n)
        if on_bytes is not None:
            on_bytes(n)
    return pos - start


def _receive_buffer(fd: int, reader: RangeReader, part: int, pos: int, end: int, feed: InOrderHash,
                    buffers: BufferPool, stop: threading.Event) -> int:
    """One pooled buffer's worth received, written at ``pos`` and handed to the hash."""
    buffer = buffers.take(stop)
    view = memoryview(buffer)[: min(len(buffer), end - pos)]
    try:
        n = reader.readinto(view)
        if not n:
            raise DigestMismatch(f"the blob ended at byte {pos}, expected {end}")
        pwrite_all(fd, view[:n], pos)
    except BaseException:
        buffers.give(buffer)
        raise
    feed.wrote(part, pos, view[:n], functools.partial(buffers.give, buffer))
    return n
