"""Verified chunks of lazy reads, kept in the model cache so that a range read twice moves once.

    $OCIBRIDGE_CACHE/models/chunks/sha256/<hex>    one chunk of some layer, named by its SHA-256
    $OCIBRIDGE_CACHE/models/chunks/blake3/<hex>    the same for a chunk of a BLAKE3 table
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
    from ocibridge.chunks.chunktable import LayerChunks

from ocibridge.cache.locks import flocked
from ocibridge.chunks import hashes
from ocibridge.core.fsutil import atomic_writer, pread_full, pwrite_all, write_sliced
from ocibridge.core.stale import locked_tempfile, remove_stale
from ocibridge.oci.digest import is_sha256_hex
from ocibridge.stores.partial import PARTIAL_PREFIX


class CacheChunks:
    """The ``chunks`` directory of a model cache root (a :class:`lazyread.chunkstore.ChunkStore`)."""

    def __init__(self, root: Path):
        self.root = root
        self.dirs = {name: root / "chunks" / name for name in hashes.KNOWN}  # one directory per hash
        self.layers = root / "chunks" / "layers"
        self.lock = root / "locks" / "cache.lock"

    def path(self, chunk_id: str) -> Path:
        """``chunks/<hash>/<hex>`` of a ``<hash>:<hex>`` chunk id (a SHA-256 chunk's file is
        where it was before tables named their hash)."""
        name, _, hexpart = chunk_id.partition(":")
        if name not in self.dirs or not hashes.is_chunk_digest(hexpart):
            raise ValueError(f"not a chunk id (<hash>:<64 hex digits>): {chunk_id!r}")
        return self.dirs[name] / hexpart

    def layer_path(self, key: str) -> Path:
        if not is_sha256_hex(key):
            raise ValueError(f"not a layer key (64 hex digits): {key!r}")
        return self.layers / key

    # -- one chunk per file ------------------------------------------------------------------
    def has(self, chunk_id: str) -> bool:
        return self.path(chunk_id).is_file()

    def get(self, chunk_id: str) -> bytes | None:
        path = self.path(chunk_id)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        _mark_used(path)
        return data

    def put(self, chunk_id: str, data: bytes | bytearray) -> None:
        final = self.path(chunk_id)
        if final.is_file():
            return
        with contextlib.suppress(OSError), flocked(self.lock, shared=True), atomic_writer(final, 0o444) as out:
            write_sliced(out, data)

    def drop(self, chunk_id: str) -> None:
        with contextlib.suppress(OSError), flocked(self.lock, shared=True):
            os.unlink(self.path(chunk_id))

    def of_hash(self, algorithm: str) -> HashChunks:
        """The chunk files of one hash as a delta's ``LocalChunks`` (keyed by bare hex)."""
        return HashChunks(self, algorithm)

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

    def whole_layer(self, chunks: LayerChunks, chunk_size: int) -> Path | None:
        """The layer file of ``chunks`` (named by their content key) if it holds the whole layer
        (a lazy read may have kept only its first chunks), marked used; else None. Only a reader
        whose manifest binds this very table may ask: the key vouches for nothing else."""
        return self.whole_layer_of(chunks.content_key(chunk_size), chunks.size)

    def whole_layer_of(self, key: str, size: int) -> Path | None:
        """:meth:`whole_layer` by a content key already made (serve's, once per table entry)."""
        path = self.layer_path(key)
        try:
            if path.stat().st_size != size:
                return None
            os.utime(path)
        except OSError:
            return None
        return path

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
        found = [p for d in (*self.dirs.values(), self.layers) if d.is_dir() for p in d.iterdir()
                 if is_sha256_hex(p.name)]
        return sorted(found, key=_mtime)

    def remove(self, path: Path) -> int | None:
        """Remove one chunk or layer file; the bytes that gave back. None if nothing was removed:
        it was gone, or a snapshot links it still (a layer file ``path`` answered: unlinking this
        name would free no byte and hide the layer from serve and lazy reads; once that snapshot
        goes it is an ordinary file again). Called under the cache lock held exclusive, so no
        snapshot links it between the check and the unlink."""
        try:
            st = path.stat()
            if st.st_nlink > 1:
                return None
            os.unlink(path)
        except OSError:
            return None
        return st.st_size

    def remove_orphans(self) -> int:
        """Temporary files of writers that died before their rename (kill -9): how many."""
        # (and a whole-read fill's partial file, once old: kept until then for its resume)
        return sum(remove_stale(d) for d in self.dirs.values()) + remove_stale(self.layers, PARTIAL_PREFIX)


class HashChunks:
    """The chunk files of one hash, by bare hex digest (a :class:`chunks.delta.LocalChunks`):
    what a delta reuses; the reader checks what it gets."""

    def __init__(self, chunks: CacheChunks, algorithm: str):
        self._chunks = chunks
        self._algorithm = hashes.check_name(algorithm)

    def has(self, hexdigest: str) -> bool:
        return self._chunks.has(f"{self._algorithm}:{hexdigest}")

    def read(self, hexdigest: str, size: int) -> bytes | None:
        return self._chunks.get(f"{self._algorithm}:{hexdigest}")

    def damaged(self, hexdigest: str) -> None:
        self._chunks.drop(f"{self._algorithm}:{hexdigest}")

    def close(self) -> None:
        pass


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
