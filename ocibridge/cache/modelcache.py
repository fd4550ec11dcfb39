"""The model cache on disk, and the snapshots ``ocibridge path`` answers with.

    $OCIBRIDGE_CACHE/models (the cache root: ~/.cache/ocibridge unless set; core/environment.py)
        oci-layout, index.json, blobs/sha256/<hex>   verified blobs, read-only, once each
        snapshots/<manifest hex>[-<filter id>]/      the files: hard links to the blobs
        refs/<reference, quoted>.json                what a reference last resolved to
        locks/                                       flock files (blobs, snapshots, the cache)

A snapshot is built in a temporary directory beside the others and renamed into place whole,
so it is there complete or not at all; a build holds the cache lock shared, ``prune`` holds
it exclusive.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ocibridge.cache.blobsource import CacheSource, NeverFetched
from ocibridge.cache.locks import flocked
from ocibridge.cache.records import (
    TEMP_PREFIX,
    Origin,
    complete_snapshot,
    read_record,
    record_bytes,
    ref_file,
    snapshot_name,
)
from ocibridge.cache.records import model_cache_root as model_cache_root  # where the cache is, named here too
from ocibridge.chunks.delta import DeltaResult
from ocibridge.core import boundedjson
from ocibridge.core.fsutil import atomic_write_bytes
from ocibridge.core.pathfilter import PathFilter
from ocibridge.core.smallfile import read_small
from ocibridge.errors import OcibridgeError
from ocibridge.oci.digest import verify_bytes
from ocibridge.oci.mediatypes import INDEX_TYPES
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import MAX_MANIFEST_BYTES, Store
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.progress_events import ProgressFn

_PINNED = re.compile(r"sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class Snapshot:
    """A snapshot directory and what it holds."""

    path: Path
    manifest: Descriptor  # the model manifest's (its bytes are in the cache)
    fetched: tuple[str, ...] = ()  # blobs downloaded to make it (none: all were cached)
    deltas: tuple[DeltaResult, ...] = ()  # those of them built partly from chunks the cache held


class ModelCache:
    """The cache at ``root`` (default :func:`model_cache_root`)."""

    def __init__(self, root: Path | None = None):
        self.root = root if root is not None else model_cache_root()
        self.blobs = LayoutStore(self.root, create=True)
        self.snapshots = self.root / "snapshots"
        self.refs = self.root / "refs"
        self.locks = self.root / "locks"
        for directory in (self.snapshots, self.refs, self.locks):
            directory.mkdir(parents=True, exist_ok=True)

    # -- references --------------------------------------------------------------------------
    def remember(self, reference: str, desc: Descriptor, origin: Origin | None = None) -> None:
        """Record what ``reference`` resolved to, for an offline resolution later (and, with
        its ``origin``, for the warm answer of :mod:`.fastpath`)."""
        data = record_bytes(reference, desc.mediaType, desc.digest, desc.size, origin)
        atomic_write_bytes(ref_file(self.root, reference), data)

    def remembered(self, reference: str) -> Descriptor:
        """What ``reference`` resolved to when last fetched; one error line if never."""
        try:
            record = read_record(self.root, reference)
        except ValueError as e:
            raise OcibridgeError(f"model cache: the record of {reference} is damaged ({e})") from None
        if record is not None:
            return Descriptor(mediaType=record.media_type, digest=record.digest, size=record.size)
        pinned = self._pinned_manifest(reference)
        if pinned is not None:
            return pinned
        raise NeverFetched(f"offline: {reference} was never fetched into the model cache ({self.root})")

    def _pinned_manifest(self, reference: str) -> Descriptor | None:
        """A reference pinned by digest (``…@sha256:…``) whose manifest the cache holds, fetched
        under any name: it means that manifest, wherever it was fetched from."""
        found = _PINNED.search(reference)
        if found is None:
            return None
        path = self.blobs.blob_path(found.group(0))
        try:
            data = read_small(path, MAX_MANIFEST_BYTES, "cached manifest")
            media_type = boundedjson.loads(data).get("mediaType")
        except (OSError, ValueError, AttributeError, OcibridgeError):
            return None
        if not isinstance(media_type, str):
            return None
        return Descriptor(mediaType=media_type, digest=found.group(0), size=len(data))

    # -- snapshots ---------------------------------------------------------------------------
    def snapshot(self, remote: Store | None, reference: str, *, shown: str,
                 include: Sequence[str] = (), exclude: Sequence[str] = (),
                 concurrency: int = 4, origin: tuple[str, str] | None = None,
                 progress: ProgressFn | None = None) -> Snapshot:
        """The snapshot of ``reference`` (a tag or digest of ``remote``; with ``remote`` None,
        offline: ``shown`` as last resolved). Only blobs the cache lacks are fetched.
        ``origin`` (host, repository): ``remote`` is that registry repository, asked directly;
        the record then lets a later warm ``path`` check the tag with one request.
        ``progress``: the events of each blob the snapshot needs (transfer/progress.py).
        A layer the manifest's chunk table describes is built from the chunks other cached
        blobs share with it where it can (a delta: only the other chunks are fetched)."""
        if remote is None:
            desc = self.remembered(shown)
        else:
            desc = top = remote.resolve(reference)
            from ocibridge.stores.tombstones import refuse_tombstone

            refuse_tombstone(remote, desc, shown)
            if desc.mediaType in INDEX_TYPES:  # an index of one ModelPack entry: that entry
                from ocibridge.model.extract import resolve_model

                desc = resolve_model(remote, reference)
            self._keep_manifest(remote, desc)
            self.remember(shown, desc, None if origin is None else Origin(*origin, reference, top.digest))
        name = snapshot_name(desc.digest, include, exclude)
        final = self.snapshots / name
        if complete_snapshot(self.root, name) is not None:
            return Snapshot(final, desc)
        with flocked(self.locks / "cache.lock", shared=True), flocked(self.locks / f"snapshot-{name}.lock"):
            if complete_snapshot(self.root, name) is not None:  # another process built it while we waited
                return Snapshot(final, desc)
            from ocibridge.cache.deltas import LocalDelta
            from ocibridge.chunks.bound import bound_table
            from ocibridge.chunks.chunkindex import ChunkIndex
            from ocibridge.model.extract import extract  # building only: a cached snapshot needs none of it

            table = bound_table(self.blobs, remote, desc)
            delta = None if table is None else LocalDelta(table, ChunkIndex(self.root))
            source = CacheSource(self.blobs, self.locks, remote, desc, delta, progress)
            staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=self.snapshots))
            try:
                extract(source, desc.digest, staging, concurrency=concurrency, progress=progress,
                        select=PathFilter.of(include, exclude))
                _read_only(staging)
                os.rename(staging, final)
            except BaseException:
                remove_tree(staging)
                raise
            return Snapshot(final, desc, tuple(source.fetched), tuple(delta.results if delta is not None else ()))

    def _keep_manifest(self, remote: Store, desc: Descriptor) -> None:
        """The model manifest goes into the cache (verified), so offline builds can read it."""
        if self.blobs.exists(desc):
            return
        data = verify_bytes(remote.fetch_bytes(desc), desc.digest, desc.size, what="manifest")
        path = self.blobs.blob_path(desc.digest)
        atomic_write_bytes(path, data)
        os.chmod(path, 0o444)

    def snapshot_dirs(self) -> list[Path]:
        return sorted(p for p in self.snapshots.iterdir()
                      if p.is_dir() and not p.name.startswith(TEMP_PREFIX))


def _read_only(tree: Path) -> None:
    """Files lose their write bits, then directories (deepest first)."""
    for dirpath, _dirnames, filenames in os.walk(tree, topdown=False):
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if not os.path.islink(path) and st.st_mode & 0o222:
                os.chmod(path, st.st_mode & 0o7555)
        os.chmod(dirpath, 0o555)


def remove_tree(tree: Path) -> None:
    """Remove a (read-only) snapshot tree."""
    def writable(func: Callable[..., object], path: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o755)
            func(path)

    with contextlib.suppress(OSError):
        os.chmod(tree, 0o755)
    for dirpath, dirnames, _ in os.walk(tree):
        for name in dirnames:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(dirpath, name), 0o755)
    shutil.rmtree(tree, onerror=writable)
