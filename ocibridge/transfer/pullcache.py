"""Pulls into a directory or an archive that resume, and skip what the directory holds.

Such a pull writes files, not blobs, so what an interrupted run had received would be lost
with its staging area. Here each registry blob first goes into a content cache (a layout
under the user's cache directory), by the resumable, ranged download of a layout
(:mod:`.stores.partial`): an interrupted run leaves its verified blobs and its partial blob
there, and the next run continues. A file the output directory already holds with the
layer's digest is read from there instead of the network. The cached blobs a pull used are
removed once it succeeds (they are in the output now); what a failed pull left is removed by
``cache prune`` (:mod:`.pullprune`), which leaves alone what a pull running meanwhile holds.

A layer the manifest's chunk table covers is checked by the table as it lands instead of by
its SHA-256, and kept under the table's content key, not the layer digest
(:mod:`.tabledpull`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, cast

from ocibridge.core.closing import ClosesOnExit
from ocibridge.core.environment import cache_root
from ocibridge.core.fsutil import safe_relpath, write_sliced
from ocibridge.core.lockfile import flocked_file
from ocibridge.errors import NotFound, OcibridgeError, UnsafePath
from ocibridge.oci.digest import CHUNK, VerifyingReader, new_hasher, split_digest
from ocibridge.oci.layerinfo import layer_path
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import Store, is_manifest
from ocibridge.stores.forwarding import ForwardingReads
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.ranged import ByteCount, DeltaBuilder, RangedBlobSource, RangedStore
from ocibridge.transfer.progress import ProgressFn
from ocibridge.transfer.tabledpull import LayerTables, forget, sweep

#: the pull cache's folder in the cache root
PULLS = "pulls"
#: held shared by every pull through the cache for its run: ``cache prune`` takes it exclusive
#: without waiting, and leaves the complete files alone when it cannot (:mod:`.pullprune`)
PULL_LOCK = ".ocibridge-pulls.lock"


def pull_cache_dir() -> Path:
    """Where the pull cache is (``$OCIBRIDGE_CACHE/pulls``)."""
    return cache_root() / PULLS


class _CachedBlob(ClosesOnExit):
    """A cached blob verified a moment ago: read it, or link it to where it is going (a
    :class:`~ocibridge.stores.base.VerifiedFile`: a directory pull writes each byte once)."""

    def __init__(self, path: Path):
        self._path = path
        self._file = open(path, "rb")  # noqa: SIM115 - closed by close()

    def read(self, n: int = -1) -> bytes:
        return self._file.read(n)

    def link_to(self, target: Path, mode: int) -> int:
        try:
            os.link(self._path, target)  # the cache's name is dropped when the pull succeeds
        except OSError:  # another file system, or no hard links: copy it
            with open(target, "xb") as out:
                self._file.seek(0)
                while chunk := self._file.read(CHUNK):
                    write_sliced(out, chunk)
        os.chmod(target, mode)
        return target.stat().st_size

    def close(self) -> None:
        self._file.close()


class CachedPullSource(ForwardingReads[Store]):
    """``store`` for one pull, read-only: blobs through the resumable cache, or from files
    already in ``existing``; everything else is the store's own."""

    def __init__(self, store: Store, cache: LayoutStore, existing: Path | None,
                 progress: ProgressFn | None, delta: DeltaBuilder | None = None):
        super().__init__(store)  # every read but open_blob: the store's own
        self._cache = cache
        self._existing = existing
        self._progress = progress
        self._delta = delta  # builds a blob from chunks held here, where a chunk table allows
        self._tables = delta if isinstance(delta, LayerTables) else None  # the table the manifest binds
        self.used: set[str] = set()  # blobs read through the cache (fetched now or before)
        self.tabled: set[Path] = set()  # layers checked by the table, kept under its content key
        self._sweep_lock = threading.Lock()
        self._swept = False  # what killed runs left under the table keys: swept before the first fetch
        self.reused = 0  # files found in the output directory

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        local = self._existing_file(desc)
        if local is not None:
            self.reused += 1
            return VerifyingReader(open(local, "rb"), desc.digest, desc.size)  # type: ignore[return-value]
        if is_manifest(desc) or not isinstance(self._inner, RangedBlobSource):
            return self._inner.open_blob(desc)
        verified_now = False
        if not self._cache.exists(desc):
            progress, on_bytes = self._progress, None
            if progress is not None:
                def on_bytes(n: int) -> None:
                    progress("bytes", desc, n)
            final = self._cache.blob_path(desc.digest)
            if self._delta is None or not self._delta.build(final, desc, self._inner, on_bytes):
                tabled = self._by_table(desc, on_bytes)
                if tabled is not None:
                    return tabled
                self._cache.download_blob(desc, self._inner, on_bytes=on_bytes)
            verified_now = True
        self.used.add(desc.digest)
        try:
            if verified_now:  # hashed on its way in a moment ago: not hashed a second time
                return cast(BinaryIO, _CachedBlob(self._cache.blob_path(desc.digest)))
            return self._cache.open_blob(desc)  # from an earlier run: verified as it is read
        except (NotFound, FileNotFoundError):  # another pull's clean-up took it
            return self._inner.open_blob(desc)

    def _by_table(self, desc: Descriptor, on_bytes: ByteCount | None) -> BinaryIO | None:
        """``desc`` checked by the manifest's chunk table as it lands, kept under the table's
        content key (never the layer digest: :mod:`.tabledpull`); None where no table covers it."""
        inner = cast(RangedStore, self._inner)
        covered = None if self._tables is None else self._tables.checked_by_table(desc, inner)
        if covered is None:
            return None
        with self._sweep_lock:
            if not self._swept:
                self._swept = True
                sweep(self._cache.root)
        path = covered.fetch(self._cache.root, inner, on_bytes)
        self.tabled.add(path)
        try:
            return cast(BinaryIO, _CachedBlob(path))
        except FileNotFoundError:  # another pull's clean-up took it
            return self._inner.open_blob(desc)

    def _existing_file(self, desc: Descriptor) -> Path | None:
        """The output file this layer would write, when it is already there with its digest."""
        if self._existing is None:
            return None
        name = layer_path(desc)
        if name is None:
            return None
        try:
            path = self._existing / safe_relpath(name, "layer file path")
        except UnsafePath:
            return None
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size != desc.size:
                return None
            hasher = new_hasher(desc.digest)
            with open(path, "rb") as f:
                while chunk := f.read(CHUNK):
                    hasher.update(chunk)
        except (OSError, OcibridgeError):
            return None
        return path if hasher.hexdigest() == split_digest(desc.digest)[1] else None

    def forget_used(self) -> None:
        for digest in self.used:
            with contextlib.suppress(FileNotFoundError):
                self._cache.blob_path(digest).unlink()
        for path in self.tabled:
            forget(path)


@contextlib.contextmanager
def cached_pull(store: Store, existing: Path | None,
                progress: ProgressFn | None = None, delta: DeltaBuilder | None = None) -> Iterator[Store]:
    """``store`` seen through the pull cache for the block; on success the blobs it read from
    the cache are dropped, on failure or interrupt they stay for the next run. ``delta``: a
    blob whose chunks are partly held here is built from them (cache/deltas.py)."""
    if not isinstance(store, RangedBlobSource):
        yield store
        return
    cache = LayoutStore(pull_cache_dir(), create=True)
    with flocked_file(cache.root / PULL_LOCK, shared=True):  # a prune leaves complete files while held
        source = CachedPullSource(store, cache, existing, progress, delta)
        yield cast(Store, source)
        source.forget_used()
