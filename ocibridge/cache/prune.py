"""Keeping the model cache in bounds: snapshots unused for a while go, then the oldest until
the cache fits a size, then every blob no remaining snapshot uses, and the chunk-index files
(``chunks/tables``) of the blobs gone. What failed pulls left in the pull cache beside it
(``pulls/``: :mod:`ocibridge.transfer.pullprune`) goes by the same age, and first for the size."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ocibridge.cache.chunks import CacheChunks
from ocibridge.cache.locks import flocked
from ocibridge.cache.modelcache import ModelCache, remove_tree
from ocibridge.chunks.chunkindex import ChunkIndex
from ocibridge.transfer.pullprune import Leftover, leftovers, pulls_paused, remove


@dataclass
class CachePrune:
    """What a prune removed."""

    snapshots: list[str] = field(default_factory=list)
    blobs: int = 0
    chunks: int = 0  # verified chunks of lazy reads (cache/chunks.py)
    tables: int = 0  # chunk-index files of blobs no longer cached (chunks/chunkindex.py)
    freed: int = 0  # bytes given back to the file system
    size: int = 0  # bytes the cache takes after the prune, the pull cache's included
    pulls: int = 0  # leftovers of failed pulls removed from the pull cache (transfer/pullprune.py)
    pulls_freed: int = 0  # their bytes
    pulls_held: int = 0  # leftovers that were due but a running pull holds: they stay

    def as_dict(self) -> dict[str, object]:
        return {"snapshots": self.snapshots, "blobs": self.blobs, "chunks": self.chunks, "tables": self.tables,
                "freed": self.freed, "size": self.size,
                "pulls": {"removed": self.pulls, "freed": self.pulls_freed, "held": self.pulls_held}}


def disk_use(root: Path) -> int:
    """Bytes of the files under ``root``, a file linked many times counted once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def prune(cache: ModelCache, *, older_than: float | None = None, max_size: int | None = None,
          pulls: Path | None = None) -> CachePrune:
    """Remove snapshots (and chunks of lazy reads) not used for ``older_than`` seconds, then
    chunks least recently read first and then the least recently used snapshots until the cache takes at
    most ``max_size`` bytes; blobs no snapshot links go with them. A layer file a snapshot links
    (``ocibridge path``) stays while that snapshot does: removing it would free nothing and hide
    it from serve and lazy reads. Waits for builds in progress
    and chunk writes (they hold the cache lock shared).

    ``pulls``: the pull cache's folder. Its leftovers (blobs, partial downloads, table-checked
    layers of pulls that failed) not written for ``older_than`` go too; they count in the size
    and go first, oldest first, for ``max_size`` (they only save a resume). What a running pull
    holds stays, never waited for: a partial download whose lock is taken, and every complete
    file while any pull runs (:mod:`ocibridge.transfer.pullprune`)."""
    done = CachePrune()
    chunks = CacheChunks(cache.root)
    index = ChunkIndex(cache.root)
    with flocked(cache.locks / "cache.lock"), _paused(pulls) as no_pull_runs:
        before = disk_use(cache.root) + _use(pulls)
        snapshots = sorted(cache.snapshot_dirs(), key=lambda p: p.stat().st_mtime)
        left = leftovers(pulls) if pulls is not None else []
        if older_than is not None:
            cutoff = time.time() - older_than
            for leftover in [lo for lo in left if lo.mtime < cutoff]:
                _drop_leftover(leftover, done, left, no_pull_runs)
            for snap in [s for s in snapshots if s.stat().st_mtime < cutoff]:
                _drop(snap, done, snapshots)
            for chunk in chunks.files():
                if _mtime(chunk) < cutoff:
                    done.chunks += int(chunks.remove(chunk) is not None)
        done.blobs += _collect(cache, snapshots)
        done.tables += index.remove_orphans()
        if max_size is not None:  # pull leftovers and chunks of lazy reads go first: they only save a fetch
            size = disk_use(cache.root) + _use(pulls)
            for leftover in list(left):
                if size <= max_size:
                    break
                size -= _drop_leftover(leftover, done, left, no_pull_runs)
            pulls_size = _use(pulls)
            _drop_chunks(chunks, done, disk_use(cache.root) + pulls_size, max_size)
            while snapshots and disk_use(cache.root) + pulls_size > max_size:
                _drop(snapshots[0], done, snapshots)
                done.blobs += _collect(cache, snapshots)
                done.tables += index.remove_orphans()  # their bytes count against max_size too
                # the layer files it linked are ordinary files now: they go before the next snapshot
                _drop_chunks(chunks, done, disk_use(cache.root) + pulls_size, max_size)
        for stale in cache.snapshots.glob(".tmp-*"):  # builds killed before their rename
            remove_tree(stale)
        chunks.remove_orphans()  # chunk and layer files of lazy readers killed mid-write
        done.size = disk_use(cache.root) + _use(pulls)
        done.freed = before - done.size
    return done


@contextlib.contextmanager
def _paused(pulls: Path | None) -> Iterator[bool]:
    """Whether no pull runs (:func:`~ocibridge.transfer.pullprune.pulls_paused`), for the block."""
    if pulls is None:
        yield True
        return
    with pulls_paused(pulls) as paused:
        yield paused


def _use(pulls: Path | None) -> int:
    return 0 if pulls is None else disk_use(pulls)


def _drop_leftover(leftover: Leftover, done: CachePrune, left: list[Leftover], no_pull_runs: bool) -> int:
    """Remove a pull's leftover unless a running pull holds it; the bytes it gave back."""
    left.remove(leftover)
    if not remove(leftover, complete_files=no_pull_runs):
        done.pulls_held += 1
        return 0
    done.pulls += 1
    done.pulls_freed += leftover.size
    return leftover.size


def _drop_chunks(chunks: CacheChunks, done: CachePrune, size: int, max_size: int) -> None:
    """Chunk and layer files, least recently used first, until ``size`` fits ``max_size``; a
    layer file a snapshot links stays (it would free nothing)."""
    for chunk in chunks.files():
        if size <= max_size:
            return
        freed = chunks.remove(chunk)
        if freed is not None:
            size -= freed
            done.chunks += 1


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("inf")  # gone already: nothing to remove


def _drop(snap: Path, done: CachePrune, snapshots: list[Path]) -> None:
    remove_tree(snap)
    snapshots.remove(snap)
    done.snapshots.append(snap.name)


def _collect(cache: ModelCache, snapshots: list[Path]) -> int:
    """Remove the blobs no snapshot links (a blob's only name is its own), sparing the
    manifests of the snapshots that stay."""
    keep = {s.name.split("-", 1)[0] for s in snapshots}
    removed = 0
    for blob in (cache.root / "blobs" / "sha256").iterdir():
        if blob.name in keep or not blob.is_file():
            continue
        if blob.stat().st_nlink == 1:
            blob.unlink()
            removed += 1
    return removed
