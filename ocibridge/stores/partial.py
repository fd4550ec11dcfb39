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
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from .. import interrupt
from ..errors import DigestMismatch
from ..oci.digest import CHUNK, Hasher, new_hasher, split_digest
from ..oci.models import Descriptor

PARTIAL_PREFIX = ".ocibridge-partial-"
PREFIX_SUFFIX = ".prefix"


@dataclass(frozen=True)
class RangedPlan:
    """How a large blob is fetched: parts of ``part_size`` bytes, ``parts_in_flight`` at once.
    Blobs under two parts come in one stream."""

    part_size: int = 32 * 1024 * 1024
    parts_in_flight: int = 8


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


class RangeReader(Protocol):
    """A reader of bytes ``[start, end)`` of a blob (unverified: the writer hashes)."""

    @property
    def ranged(self) -> bool:
        """Whether the server honoured the Range (else the reader streams from ``start``
        to the blob's end, having skipped what came before)."""
        ...

    def read(self, n: int = -1) -> bytes: ...

    def close(self) -> None: ...


@runtime_checkable
class RangedBlobSource(Protocol):
    """A store that can send part of a blob (a registry: HTTP Range), with its own plan for
    how many parts of what size to ask at once."""

    ranged_plan: RangedPlan

    def open_blob_range(self, desc: Descriptor, start: int, end: int | None = None) -> RangeReader:
        ...


ByteCount = Callable[[int], None]


@runtime_checkable
class ResumableBlobSink(Protocol):
    """A store that writes a blob into a file it can resume (a layout)."""

    def download_blob(self, desc: Descriptor, source: RangedBlobSource,
                      on_bytes: ByteCount | None = None) -> None:
        ...


def partial_path(directory: Path, digest: str) -> Path:
    return directory / f"{PARTIAL_PREFIX}{split_digest(digest)[1]}"


def download(final: Path, desc: Descriptor, source: RangedBlobSource,
             plan: RangedPlan | None = None, on_bytes: ByteCount | None = None) -> int:
    """Fetch ``desc`` from ``source`` into ``final`` (verified, then renamed); the bytes
    fetched over the network this time (less than the size when resumed)."""
    plan = plan or source.ranged_plan
    partial = partial_path(final.parent, desc.digest)
    marker = partial.with_name(partial.name + PREFIX_SUFFIX)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(partial, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another process on this blob: wait for it
        if final.exists() and final.stat().st_size == desc.size:
            _remove(partial, marker)
            return 0
        fetched = 0
        for fresh in (False, True):
            if fresh:  # what was kept did not verify: once more, from byte 0
                os.ftruncate(fd, 0)
                _remove(marker)
            hasher = new_hasher(desc.digest)
            got, resumed = _fetch(fd, marker, desc, source, plan, hasher, on_bytes)
            fetched += got
            if hasher.hexdigest() == split_digest(desc.digest)[1]:
                os.fsync(fd)
                os.replace(partial, final)
                _remove(marker)
                return fetched
            if not resumed:
                break  # the source itself sent wrong bytes
        _remove(partial, marker)
        raise DigestMismatch(f"{desc.digest}: the downloaded content has another digest")
    finally:
        os.close(fd)


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
        data = marker.read_bytes()
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


def _hash_range(fd: int, start: int, end: int, hasher: Hasher) -> None:
    pos = start
    while pos < end:
        interrupt.check()
        data = os.pread(fd, min(CHUNK, end - pos), pos)
        if not data:
            raise DigestMismatch("the partial file shrank while it was read")
        hasher.update(data)
        pos += len(data)


# -- fetching -------------------------------------------------------------------------------
def _fetch(fd: int, marker: Path, desc: Descriptor, source: RangedBlobSource, plan: RangedPlan,
           hasher: Hasher, on_bytes: ByteCount | None) -> tuple[int, bool]:
    """Bring the partial file to the whole blob, hashing it in order; (bytes fetched, whether
    bytes kept from before were used)."""
    size = desc.size
    part_size = plan.part_size if plan.parts_in_flight > 1 and size >= 2 * plan.part_size else size
    parts = _parts(size, max(1, part_size))
    kept = _kept(fd, marker, size, parts, part_size)
    resumed = any(kept)
    todo = [i for i, (a, b) in enumerate(parts) if kept[i] < b - a]
    if len(parts) > 1 and todo:
        i = todo[0]
        first = source.open_blob_range(desc, parts[i][0] + kept[i], parts[i][1])
        if first.ranged:
            return _parallel(fd, marker, desc, source, plan, parts, kept, first, hasher, on_bytes), resumed
        first.close()  # Range ignored: one stream, after the contiguous prefix
    prefix = 0
    for (a, b), k in zip(parts, kept, strict=True):
        prefix += k
        if k < b - a:
            break
    os.ftruncate(fd, prefix)
    _remove(marker)  # written in order from here: the file's length is the prefix
    _hash_range(fd, 0, prefix, hasher)
    if prefix >= size:
        return 0, resumed
    reader = source.open_blob_range(desc, prefix)
    try:
        return _copy_part(fd, reader, prefix, size, hasher, on_bytes), resumed
    finally:
        reader.close()


def _copy_part(fd: int, reader: RangeReader, start: int, end: int, hasher: Hasher | None,
               on_bytes: ByteCount | None, stop: threading.Event | None = None,
               record: Callable[[int], None] | None = None) -> int:
    """Write the reader's bytes at ``start``..``end`` (hashing them when ``hasher``;
    ``record`` is told the position after every write)."""
    pos = start
    while pos < end:
        if stop is not None and stop.is_set():
            raise _PartAbandoned
        data = reader.read(min(CHUNK, end - pos))
        if not data:
            raise DigestMismatch(f"the blob ended at byte {pos}, expected {end}")
        written = os.pwrite(fd, data, pos)
        if hasher is not None:
            hasher.update(data)
        pos += written
        if record is not None:
            record(pos)
        if on_bytes is not None:
            on_bytes(written)
    return pos - start


def _parallel(fd: int, marker: Path, desc: Descriptor, source: RangedBlobSource,
              plan: RangedPlan, parts: list[tuple[int, int]], kept: list[int], first: RangeReader,
              hasher: Hasher, on_bytes: ByteCount | None) -> int:
    """The missing parts in flight at once, each written at its offset and its progress
    recorded; every part joins the hash (read back from the page cache) once those before
    it have."""
    records = os.open(marker, os.O_RDWR | os.O_CREAT, 0o644)
    slots = _part_slots(plan.parts_in_flight)
    stop = threading.Event()  # a part failed: the others end at their next chunk
    todo = [i for i, (a, b) in enumerate(parts) if kept[i] < b - a]
    try:
        os.ftruncate(records, 0)
        os.pwrite(records, _header(desc.size, parts[0][1] - parts[0][0]), 0)
        for i, k in enumerate(kept):
            os.pwrite(records, b"%019d\n" % k, _HEADER + i * _RECORD)

        def fetch(i: int) -> int:
            a, b = parts[i]
            with slots:
                if stop.is_set():
                    raise _PartAbandoned
                reader = first if i == todo[0] else source.open_blob_range(desc, a + kept[i], b)

                def record(pos: int) -> None:
                    os.pwrite(records, b"%019d\n" % (pos - a), _HEADER + i * _RECORD)

                try:
                    return _copy_part(fd, reader, a + kept[i], b, None, on_bytes, stop, record)
                finally:
                    reader.close()

        fetched = 0
        with ThreadPoolExecutor(plan.parts_in_flight, thread_name_prefix="part") as pool:
            futures: dict[int, Future[int]] = {i: pool.submit(fetch, i) for i in todo}
            try:
                for i, (a, b) in enumerate(parts):
                    if i in futures:
                        fetched += futures[i].result()
                    _hash_range(fd, a, b, hasher)  # from the page cache, in order
            except BaseException:
                stop.set()
                for future in futures.values():
                    future.cancel()
                raise
        return fetched
    finally:
        os.close(records)


class _PartAbandoned(Exception):
    """Another part failed first; this one stops without its own error."""
