"""Blob downloads into a file that survive interrupts and go faster than one stream.

The bytes go into a partial file beside the blob (``.ocibridge-partial-<hex>``), held under
an exclusive lock while written. Interrupted (Ctrl-C, kill -9, a dead link), the file stays;
the next run re-hashes the prefix it holds (no trust in a half-file: a wrong prefix fails the
digest, and the blob is fetched again from byte 0 once) and asks only for the rest, with
Range. Large blobs are fetched as parts in flight at once, each written at its offset, while
the digest is computed in order over the contiguous prefix as it grows, so the blob is hashed
once and verified before it is renamed to its final name. A ``.prefix`` file beside it
records how much of the partial file is contiguous (parts past a gap are fetched again).
A server that ignores Range gets one stream.
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
    parts_in_flight: int = 4


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
        for attempt in range(2):
            prefix = _contiguous_prefix(fd, marker, desc.size) if attempt == 0 else 0
            hasher = new_hasher(desc.digest)
            _hash_range(fd, 0, prefix, hasher)
            fetched += _fetch_rest(fd, marker, desc, source, plan, prefix, hasher, on_bytes)
            if hasher.hexdigest() == split_digest(desc.digest)[1]:
                os.fsync(fd)
                os.replace(partial, final)
                with contextlib.suppress(FileNotFoundError):
                    marker.unlink()
                return fetched
            if prefix == 0:
                break  # the source itself sent wrong bytes
            os.ftruncate(fd, 0)  # the kept prefix was wrong: once more, from byte 0
        _remove(partial, marker)
        raise DigestMismatch(f"{desc.digest}: the downloaded content has another digest")
    finally:
        os.close(fd)


def _remove(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _contiguous_prefix(fd: int, marker: Path, size: int) -> int:
    """How many leading bytes of the partial file were written without a gap."""
    on_disk = os.fstat(fd).st_size
    try:
        recorded = int(marker.read_text())
    except (FileNotFoundError, ValueError):
        recorded = on_disk if not marker.exists() else 0
    prefix = max(0, min(recorded, on_disk, size))
    return prefix


def _hash_range(fd: int, start: int, end: int, hasher: Hasher) -> None:
    pos = start
    while pos < end:
        interrupt.check()
        data = os.pread(fd, min(CHUNK, end - pos), pos)
        if not data:
            raise DigestMismatch("the partial file shrank while it was read")
        hasher.update(data)
        pos += len(data)


def _fetch_rest(fd: int, marker: Path, desc: Descriptor, source: RangedBlobSource,
                plan: RangedPlan, prefix: int, hasher: Hasher, on_bytes: ByteCount | None) -> int:
    size = desc.size
    if prefix >= size:
        return 0
    if plan.parts_in_flight > 1 and size - prefix >= 2 * plan.part_size:
        parts = [(s, min(s + plan.part_size, size)) for s in range(prefix, size, plan.part_size)]
        first = source.open_blob_range(desc, parts[0][0], parts[0][1])
        if first.ranged:
            return _parallel(fd, marker, desc, source, plan, parts, first, hasher, on_bytes)
        first.close()  # Range ignored: one stream
    os.ftruncate(fd, prefix)
    with contextlib.suppress(FileNotFoundError):
        marker.unlink()  # written in order from here: the file size is the prefix
    reader = source.open_blob_range(desc, prefix)
    try:
        return _copy_part(fd, reader, prefix, size, hasher, on_bytes)
    finally:
        reader.close()


def _copy_part(fd: int, reader: RangeReader, start: int, end: int, hasher: Hasher | None,
               on_bytes: ByteCount | None, stop: threading.Event | None = None) -> int:
    """Write the reader's bytes at ``start``..``end`` (hashing them when ``hasher``)."""
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
        if on_bytes is not None:
            on_bytes(written)
    return pos - start


def _parallel(fd: int, marker: Path, desc: Descriptor, source: RangedBlobSource,
              plan: RangedPlan, parts: list[tuple[int, int]], first: RangeReader,
              hasher: Hasher, on_bytes: ByteCount | None) -> int:
    """Parts in flight at once; each finished part joins the hash once those before it have."""
    marker.write_text(str(parts[0][0]))
    stop = threading.Event()  # a part failed: the others end at their next chunk

    def fetch(index: int) -> int:
        start, end = parts[index]
        if stop.is_set():
            raise _PartAbandoned
        reader = first if index == 0 else source.open_blob_range(desc, start, end)
        try:
            return _copy_part(fd, reader, start, end, None, on_bytes, stop)
        finally:
            reader.close()

    fetched = 0
    with ThreadPoolExecutor(plan.parts_in_flight, thread_name_prefix="part") as pool:
        futures: list[Future[int]] = [pool.submit(fetch, i) for i in range(len(parts))]
        try:
            for (start, end), future in zip(parts, futures, strict=True):
                fetched += future.result()
                _hash_range(fd, start, end, hasher)  # from the page cache, in order
                marker.write_text(str(end))
        except BaseException:
            stop.set()
            for future in futures:
                future.cancel()
            raise
    return fetched


class _PartAbandoned(Exception):
    """Another part failed first; this one stops without its own error."""
