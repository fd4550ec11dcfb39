"""Verified chunks of lazy reads, kept in the model cache so that a range read twice moves once.

    $OCIBRIDGE_CACHE/models/chunks/sha256/<hex>    one chunk of some layer, named by its SHA-256
    $OCIBRIDGE_CACHE/models/chunks/layers/<key>    a layer's chunks from its first on (all, or up to a gap)

Chunk files are content-addressed, as the chunk tables name them (docs/lazy.md): a chunk shared
by two layers or two models is stored once. A layer read from its first byte on is kept as one
file instead (``lazyread.keeper``), named by ``LayerChunks.content_key`` (a digest of its chunk
digests): one file costs what a pull's write costs, 1,024 chunk files cost more than the read. Every file is
written beside its final name (locked while written, so ``prune`` can tell an orphan of a
killed writer) and renamed into place read-only, so a reader sees a whole file or none; the
renames hold the cache lock shared, so ``prune`` (exclusive) never removes one mid-write.
Readers take no lock: a file pruned under them reads as absent, and every chunk read back is
checked against the table by the reader (``lazyread.blobreader``), so a damaged file costs a
fetch, never a wrong byte. A read marks the file used (its mtime): prune goes by last use.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ocibridge.chunks.chunkindex import IndexedChunks
    from ocibridge.chunks.table import LayerChunks

from ocibridge.cache.locks import flocked
from ocibridge.core.fsutil import atomic_writer, pread_full, pwrite_all, write_sliced
from ocibridge.core.stale import locked_tempfile, remove_stale
from ocibridge.oci.digest import is_sha256_hex
from ocibridge.stores.partial import PARTIAL_PREFIX


class CacheChunks:
    """The ``chunks`` directory of a model cache root (a :class:`lazyread.chunkstore.ChunkStore`)."""

    def __init__(self, root: Path):
        self.root = root
        self.dir = root / "chunks" / "sha256"
        self.layers = root / "chunks" / "layers"
        self.lock = root / "locks" / "cache.lock"

    def path(self, sha256_hex: str) -> Path:
        if not is_sha256_hex(sha256_hex):
            raise ValueError(f"not a SHA-256 hex digest: {sha256_hex!r}")
        return self.dir / sha256_hex

    def layer_path(self, key: str) -> Path:
        if not is_sha256_hex(key):
            raise ValueError(f"not a layer key (64 hex digits): {key!r}")
        return self.layers / key

    # -- one chunk per file ------------------------------------------------------------------
    def has(self, sha256_hex: str) -> bool:
        return self.path(sha256_hex).is_file()

    def get(self, sha256_hex: str) -> bytes | None:
        path = self.path(sha256_hex)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        _mark_used(path)
        return data

    def put(self, sha256_hex: str, data: bytes | bytearray) -> None:
        final = self.path(sha256_hex)
        if final.is_file():
            return
        with contextlib.suppress(OSError), flocked(self.lock, shared=True), atomic_writer(final, 0o444) as out:
            write_sliced(out, data)

    def drop(self, sha256_hex: str) -> None:
        with contextlib.suppress(OSError), flocked(self.lock, shared=True):
            os.unlink(self.path(sha256_hex))

    # -- as a delta's LocalChunks (chunks/delta.py): the reader checks what it gets ---------
    def read(self, sha256_hex: str, size: int) -> bytes | None:
        return self.get(sha256_hex)

    def damaged(self, sha256_hex: str) -> None:
        self.drop(sha256_hex)

    def close(self) -> None:
        pass

    # -- whole layers ------------------------------------------------------------------------
    def open_layer(self, key: str) -> LayerFile | None:
        path = self.layer_path(key)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        _mark_used(path)
        return LayerFile(fd)

    def open_blob(self, digest: str) -> LayerFile | None:
        algorithm, _, hexpart = digest.partition(":")
        if algorithm != "sha256" or not is_sha256_hex(hexpart):
            return None
        try:
            return LayerFile(os.open(self.root / "blobs" / "sha256" / hexpart, os.O_RDONLY))
        except OSError:
            return None

    def stage_layer(self, key: str) -> StagedLayerFile | None:
        try:
            self.layers.mkdir(parents=True, exist_ok=True)
            remove_stale(self.layers)  # a reader killed mid-run left its (layer-sized) file
            fd, tmp = locked_tempfile(self.layers)
        except OSError:
            return None
        return StagedLayerFile(fd, Path(tmp), self.layer_path(key), self.lock)

    def layer_target(self, key: str) -> Path | None:
        try:
            self.layers.mkdir(parents=True, exist_ok=True)
        except OSError:
            return None
        return self.layer_path(key)

    def drop_layer(self, key: str) -> None:
        with contextlib.suppress(OSError), flocked(self.lock, shared=True):
            os.unlink(self.layer_path(key))

    def elsewhere(self, chunks: LayerChunks) -> IndexedChunks:
        from ocibridge.chunks.chunkindex import ChunkIndex

        return ChunkIndex(self.root).for_layer(chunks)

    # -- for prune ---------------------------------------------------------------------------
    def files(self) -> list[Path]:
        """Chunk and layer files, least recently used first."""
        found = [p for d in (self.dir, self.layers) if d.is_dir() for p in d.iterdir() if is_sha256_hex(p.name)]
        return sorted(found, key=_mtime)

    def remove(self, path: Path) -> int:
        """Remove one chunk or layer file; its size, 0 if it was gone."""
        try:
            size = path.stat().st_size
            os.unlink(path)
            return size
        except OSError:
            return 0

    def remove_orphans(self) -> int:
        """Temporary files of writers that died before their rename (kill -9): how many."""
        # (and a whole-read fill's partial file, once old: kept until then for its resume)
        return remove_stale(self.dir) + remove_stale(self.layers, PARTIAL_PREFIX)


class LayerFile:
    """A whole layer kept in the cache, read by offset (a :class:`lazyread.chunkstore.StoredLayer`)."""

    def __init__(self, fd: int):
        self._fd = fd

    def read_at(self, offset: int, size: int) -> bytes | None:
        try:
            data = pread_full(self._fd, size, offset)
        except OSError:
            return None
        return data if len(data) == size else None

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


class StagedLayerFile:
    """A layer file being filled (a :class:`lazyread.chunkstore.LayerStaging`): a locked temporary
    file beside its final name, renamed into place read-only by ``commit``."""

    def __init__(self, fd: int, tmp: Path, final: Path, cache_lock: Path):
        self._fd = fd
        self._tmp = tmp
        self._final = final
        self._cache_lock = cache_lock

    def write_at(self, offset: int, data: bytes | bytearray) -> None:
        pwrite_all(self._fd, data, offset)

    def read_at(self, offset: int, size: int) -> bytes:
        return os.pread(self._fd, size, offset)

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)

    def commit(self) -> None:
        try:
            os.fchmod(self._fd, 0o444)
            with flocked(self._cache_lock, shared=True):
                if _size(self._final) >= os.fstat(self._fd).st_size:
                    raise FileExistsError(self._final)  # another reader's is as long: keep it
                os.replace(self._tmp, self._final)
        except OSError:
            self.discard()  # a cache that cannot write must not fail a read
        else:
            self._close()

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)
        self._close()

    def _close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)  # (releases the lock)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _mark_used(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(path)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
