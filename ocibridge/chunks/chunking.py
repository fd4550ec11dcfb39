"""Chunk tables made by the read that hashes a push's files, so a default push binds one
without reading its large files a second time (format: docs/lazy.md).

A pending file's reader is wrapped in a :class:`ChunkingReader`: every byte the copy reads to
hash (or send) the file also goes into a per-chunk hash (BLAKE3 unless the policy names another).
The chunk digests are kept only when that reader saw the whole file once, in order, from its
first byte; anything else (a seek, a short read) leaves the file to one plain chunking read
before the manifest is written.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import BinaryIO, Protocol

from ocibridge.chunks import chunkcache, hashes
from ocibridge.chunks.chunktable import (
    DEFAULT_CHUNK_SIZE,
    MAX_CHUNK_SIZE,
    MIN_CHUNK_SIZE,
    PUSH_THRESHOLD,
    ChunkTable,
    LayerChunks,
    build_table,
    chunk_stream,
)
from ocibridge.errors import DigestMismatch, SourceError


class ChunkSource(Protocol):
    """A file a push reads (``model.package.ModelFile``, which this layer does not import): its
    path for messages, its size, its digest when known (settled here when not) and its bytes."""

    path: str
    size: int
    digest: str | None

    def open(self) -> BinaryIO: ...


@dataclass(frozen=True)
class ChunkPolicy:
    """Which raw layers a push gives a chunk table (``threshold`` bytes or more), and the chunk
    size. ``threaded``: hash the chunks on a second thread beside the whole-file hash. Off: it
    kept the wall time flat only with a core to spare; on 2 busy cores it was the slower in 3 of
    4 runs (1 GiB, load 4.5: 1.74 s against 1.27 s on one thread, the file hash alone 0.64 s),
    and a push hashes several files at once anyway (docs/benchmarks.md)."""

    chunk_size: int = DEFAULT_CHUNK_SIZE
    threshold: int = PUSH_THRESHOLD
    threaded: bool = False
    algorithm: str = hashes.DEFAULT  # the hash of the chunk digests (chunks.hashes)

    def __post_init__(self) -> None:
        hashes.check_name(self.algorithm)
        if not MIN_CHUNK_SIZE <= self.chunk_size <= MAX_CHUNK_SIZE:
            raise ValueError(f"chunk size {self.chunk_size} is not between {MIN_CHUNK_SIZE} and {MAX_CHUNK_SIZE}")
        if self.threshold < 1:
            raise ValueError(f"chunk threshold {self.threshold} is under one byte")

    def wants(self, size: int) -> bool:
        return size >= self.threshold


class ChunkHasher:
    """The digest (by ``algorithm``) of each ``chunk_size`` piece of a stream fed in order.
    Threaded, the hashing runs on its own thread (hashlib and blake3 let go of the GIL on large
    buffers), so it overlaps the reader's
    own whole-file hash instead of adding to it; the queue is bounded, so memory stays a few
    reads deep."""

    def __init__(self, chunk_size: int, *, threaded: bool, algorithm: str = hashes.DEFAULT) -> None:
        self.chunk_size = chunk_size
        self.algorithm = algorithm
        self.digests: list[str] = []
        self.size = 0
        self._new = hashes.factory(algorithm)
        self._current = self._new()
        self._filled = 0
        self._queue: queue.Queue[bytes | None] | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        if threaded:
            self._queue = queue.Queue(maxsize=8)
            self._thread = threading.Thread(target=self._run, name="chunk-hash", daemon=True)
            self._thread.start()

    def update(self, data: bytes | memoryview) -> None:
        """Hash ``data``: before this returns when not threaded (a view of a buffer about to be
        reused is fine then); threaded, a view is copied first, as its buffer may change."""
        self.size += len(data)
        if self._queue is not None:
            self._queue.put(bytes(data) if isinstance(data, memoryview) else data)
        else:
            self._hash(data)

    def finish(self) -> tuple[str, ...]:
        """The chunk digests of everything fed (waits for the hashing thread)."""
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._queue = None
        if self._error is not None:
            raise self._error
        if self._filled:
            self.digests.append(self._current.hexdigest())
            self._current, self._filled = self._new(), 0
        return tuple(self.digests)

    def _run(self) -> None:
        assert self._queue is not None
        while (data := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._hash(data)
                except BaseException as e:  # handed to finish(), on the caller's thread
                    self._error = e

    def _hash(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            take = min(len(view), self.chunk_size - self._filled)
            self._current.update(view[:take])
            self._filled += take
            view = view[take:]
            if self._filled == self.chunk_size:
                self.digests.append(self._current.hexdigest())
                self._current, self._filled = self._new(), 0


class ChunkingReader:
    """A file's reader whose bytes also feed a :class:`ChunkHasher`; :meth:`chunks` answers
    only for a single in-order read of the whole file."""

    def __init__(self, raw: BinaryIO, policy: ChunkPolicy) -> None:
        self._raw = raw
        self._hasher = ChunkHasher(policy.chunk_size, threaded=policy.threaded, algorithm=policy.algorithm)
        self._whole = True  # no seek, nothing skipped

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        if data:
            self._hasher.update(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        self._whole = False  # bytes skipped or read twice: the chunks no longer follow the file
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        """Close the file and let the hashing thread finish (the digests stay for :meth:`chunks`)."""
        try:
            self._raw.close()
        finally:
            self._hasher.finish()

    def __enter__(self) -> ChunkingReader:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def chunks(self, size: int) -> tuple[str, ...] | None:
        """The chunk digests, when this reader read exactly ``size`` bytes from the start;
        else None."""
        digests = self._hasher.finish()
        return digests if self._whole and self._hasher.size == size else None


def chunk_table(files: Iterable[ChunkSource], policy: ChunkPolicy,
                read: Mapping[str, LayerChunks]) -> ChunkTable:
    """The table of the raw-layer ``files`` of ``policy.threshold`` bytes or more: each one's
    chunks from the read that hashed it (``read``, by digest), else from the chunk cache (a file
    whose digest was known without a read: a re-push), else from one read now, which also
    settles a digest nobody knew (so the build does not read the file again) and is checked
    against one the source gave."""
    entries: dict[str, LayerChunks] = {}
    for f in files:
        if not policy.wants(f.size):
            continue
        known = None if f.digest is None else read.get(f.digest)
        if known is not None and known.algorithm != policy.algorithm:
            known = None  # (read for another table's hash: read again, never mixed into this one)
        if known is not None:
            chunkcache.remember(known, policy.chunk_size)
        elif f.digest is not None:  # named without a read (the digest cache, the source): chunked before?
            known = chunkcache.lookup(f.digest, f.size, policy.chunk_size, policy.algorithm)
        entry = known if known is not None else _read_chunks(f, policy.chunk_size, policy.algorithm)
        entries[entry.digest] = entry
    return build_table(entries.values(), policy.chunk_size, policy.algorithm)


def _read_chunks(f: ChunkSource, chunk_size: int, algorithm: str) -> LayerChunks:
    """One read of ``f``: its digest (checked against a known one, else settled) and chunks."""
    with f.open() as reader:
        entry = chunk_stream(reader, chunk_size, algorithm)
    if entry.size != f.size:
        raise SourceError(f"{f.path}: size changed while reading ({f.size} → {entry.size})")
    if f.digest is not None and f.digest != entry.digest:
        raise DigestMismatch(f"{f.path}: read as {entry.digest}, the source said {f.digest}")
    f.digest = entry.digest
    chunkcache.remember(entry, chunk_size)
    return entry
