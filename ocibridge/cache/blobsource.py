"""The store a snapshot is built from: blobs come from the cache, fetched into it once.

A blob the cache lacks is downloaded into it under a lock of its own (another process
resolving a model that shares it waits, then finds it there), by the layout's resumable,
ranged download where the source allows. Each blob is then handed to the directory writer as a
:class:`~ocibridge.stores.base.VerifiedFile`, so the snapshot's file is a hard link to it.

The cache may be shared, so a blob found there is not trusted by its name: before it is linked
or read it is opened without following a link, must be a regular file, and is hashed (what this
build downloaded was hashed as it came); the file linked is that very inode (a file swapped in
after the hash is not linked), and a blob whose bytes are not its name's is fetched again.

A layer the cache lacks by digest may be there whole under the content key of the chunk table
the manifest binds (``chunks/layers/<key>``: a lazy read, ``mount`` or ``serve`` fetched it,
checked by that table): it is hashed against the layer digest like a blob and linked from there,
never fetched again nor linked or copied under the layer digest (a name other manifests trust).
A manifest that binds another table, or none, never looks there: the key is its table's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, cast

from ocibridge.cache.deltas import LocalDelta
from ocibridge.cache.locks import flocked
from ocibridge.core.closing import ClosesOnExit
from ocibridge.errors import DigestMismatch, OcibridgeError
from ocibridge.oci.digest import new_hasher, split_digest
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import OneManifest, Store
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.ranged import RangedBlobSource
from ocibridge.transfer.progress_events import ProgressFn
from ocibridge.transfer.writer import reading, write_blob

if TYPE_CHECKING:
    from ocibridge.chunks.chunktable import ChunkTable

#: Blobs and snapshot files are never written after they are made.
READ_ONLY = 0o444


class OfflineMiss(OcibridgeError):
    """What an offline resolution needs is not in the cache."""


class NeverFetched(OfflineMiss):
    """Offline, a reference the cache holds no resolution of: each command adds what to do
    (``path``: run it once online; ``mount``: mount it once online)."""


class LinkedBlob(ClosesOnExit):
    """A verified blob of the cache: linked where it is wanted (copied where links fail)."""

    def __init__(self, path: Path, inode: tuple[int, int] | None = None):
        self._path = path
        self._file = os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb")
        st = os.fstat(self._file.fileno())
        self._inode = (st.st_dev, st.st_ino)
        if inode is not None and self._inode != inode:  # swapped since it was verified
            self._file.close()
            raise DigestMismatch(f"model cache blob {path}: replaced while it was being used: refused")

    def read(self, n: int = -1, /) -> bytes:
        return self._file.read(n)

    def link_to(self, target: Path, mode: int) -> int:
        """A link shares the blob's mode (read-only, not executable): a file the model marks
        executable (a script) is copied instead, so it keeps its mode as a pull gives it."""
        if mode & 0o111:
            return self._copy_to(target, mode)
        try:
            os.link(self._path, target, follow_symlinks=False)  # the blob keeps its read-only mode
        except OSError:  # another file system, or no hard links
            return self._copy_to(target, mode)
        st = os.lstat(target)
        if (st.st_dev, st.st_ino) != self._inode:  # not the file verified: copy the verified one
            os.unlink(target)
            return self._copy_to(target, mode)
        return st.st_size

    def _copy_to(self, target: Path, mode: int) -> int:
        """A copy from the descriptor verified (never from the name, which may have changed)."""
        self._file.seek(0)
        with open(target, "xb") as out:
            shutil.copyfileobj(self._file, out, 1 << 20)
        os.chmod(target, mode & ~0o222)
        return target.stat().st_size

    def close(self) -> None:
        self._file.close()


class CacheSource(OneManifest):
    """A read-only store over ``blobs`` (the cache's layout) that fills it from ``remote``
    (None: offline, nothing is fetched). The model manifest ``desc`` is answered from the
    cache too, so a snapshot builds the same way online and offline."""

    def __init__(self, blobs: LayoutStore, locks: Path, remote: Store | None, desc: Descriptor,
                 delta: LocalDelta | None = None, progress: ProgressFn | None = None,
                 checking: Callable[[str], None] | None = None):
        self._blobs = blobs
        #: told the digest of each MiB of a blob hashed: a reader waiting for it sees work going on
        self._checking = checking
        self._locks = locks
        self._remote = remote
        self._desc = desc
        self._delta = delta  # with the manifest's bound chunk table: delta downloads, and the index
        self._progress = progress
        self.fetched: list[str] = []  # digests this build downloaded
        self._verified: dict[str, tuple[int, int]] = {}  # digest -> the inode hashed by this build
        self._table_kept: dict[str, Path] = {}  # digest -> its table-keyed layer file, hashed

    def describe(self) -> str:
        return self._remote.describe() if self._remote is not None else f"model cache {self._blobs.root}"

    def exists(self, desc: Descriptor) -> bool:
        return self._blobs.exists(desc) or (self._remote is not None and self._remote.exists(desc))

    def held_manifest(self) -> Descriptor:
        return self._desc

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        self.ensure(desc)
        if desc.digest in self._table_kept:
            with LinkedBlob(self._table_kept[desc.digest], self._verified[desc.digest]) as kept:
                return kept.read()
        return self._blobs.fetch_bytes(desc)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        self.ensure(desc)
        path = self._table_kept.get(desc.digest) or self._blobs.blob_path(desc.digest)
        return cast(BinaryIO, LinkedBlob(path, self._verified.get(desc.digest)))

    def ensure(self, desc: Descriptor) -> None:
        """The blob is in the cache, verified, when this returns (fetched now if need be)."""
        if desc.digest in self._verified:
            return
        if self._blobs.exists(desc) and self._hashed(desc):
            self._index_it(desc)  # (fetched before its table was known)
            return
        if self._kept_by_table(desc):
            return
        if self._remote is None:
            raise OfflineMiss(f"offline: blob {desc.digest} is not in the model cache")
        with flocked(self._locks / f"{split_digest(desc.digest)[1]}.lock"):
            if self._blobs.exists(desc) and self._hashed(desc):  # another process fetched it meanwhile
                return
            remote = self._remote
            if isinstance(remote, RangedBlobSource) and desc.size > 0:
                path, on_bytes = self._blobs.blob_path(desc.digest), self._bytes_of(desc)
                if self._delta is None or not self._delta.build(path, desc, remote, on_bytes):
                    self._blobs.download_blob(desc, remote, on_bytes=on_bytes)
            else:
                write_blob(self._blobs, reading(remote, desc))
            os.chmod(self._blobs.blob_path(desc.digest), READ_ONLY)
            self.fetched.append(desc.digest)
            if not self._hashed(desc):  # what was just verified as it came is the file now there
                raise DigestMismatch(f"model cache blob {desc.digest}: changed as it was written: refused")
            self._index_it(desc)

    def _bytes_of(self, desc: Descriptor) -> Callable[[int], None] | None:
        """``bytes`` events of ``desc`` as it is received (the copy that builds the snapshot
        tells the rest: plan, start, done); reused chunks are not counted, ``done`` fills them."""
        progress = self._progress
        if progress is None:
            return None
        return lambda n: progress("bytes", desc, n)

    def _kept_by_table(self, desc: Descriptor) -> bool:
        """Whether ``desc`` is whole in the layer file named by the content key of its entry in
        the table this manifest binds (the key covers every chunk digest: what this table names),
        and those bytes are ``desc``'s (hashed, as a cached blob is). A file that is not is left
        to its readers (each checks the chunks it reads): this build fetches the layer instead."""
        table: ChunkTable | None = None if self._delta is None else self._delta.table
        entry = None if table is None else table.for_layer(desc)
        if table is None or entry is None:
            return False
        from ocibridge.cache.chunks import CacheChunks

        path = CacheChunks(self._blobs.root).whole_layer(entry, table.chunk_size)
        if path is None or not self._hashed(desc, path, discard=False):
            return False
        self._table_kept[desc.digest] = path
        if self._delta is not None:
            self._delta.remember_kept(desc)  # a later version's delta reads its chunks there
        return True

    def _index_it(self, desc: Descriptor) -> None:
        if self._delta is not None:
            self._delta.remember(desc)

    def _hashed(self, desc: Descriptor, path: Path | None = None, discard: bool = True) -> bool:
        """Whether the blob file (or ``path``) is a regular file holding exactly ``desc`` (hashed,
        ~0.85 s/GiB); one that is not (a link, another file under the name) is removed unless
        ``discard`` is False, to be fetched again."""
        path = path or self._blobs.blob_path(desc.digest)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        except OSError:  # a link planted at the blob's name
            return discard and self._discard(path)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != desc.size:
                return discard and self._discard(path)
            h = new_hasher(desc.digest)
            while chunk := os.read(fd, 1 << 20):
                h.update(chunk)
                if self._checking is not None:
                    self._checking(desc.digest)
        finally:
            os.close(fd)
        if f"{split_digest(desc.digest)[0]}:{h.hexdigest()}" != desc.digest:
            return discard and self._discard(path)
        self._verified[desc.digest] = (st.st_dev, st.st_ino)
        return True

    @staticmethod
    def _discard(path: Path) -> bool:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return False
