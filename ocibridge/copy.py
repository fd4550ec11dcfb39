"""The one graph copy: push, pull-to-store, ``copy`` and mirror jobs all run through it.

Walks the manifest graph from a root, copies every blob the destination lacks (bounded
concurrency, streamed, verified by the destination), children before parents so that a
manifest never points at something missing, then tags the root.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import BinaryIO

from .oci.models import Descriptor, Index, Manifest, parse_manifest_bytes
from .progress import ProgressFn, counting
from .signing.attach import carry_companion_tags, is_signature_referrer
from .stores.base import Mounting, Store, is_manifest
from .stores.partial import RangedBlobSource, ResumableBlobSink

DEFAULT_CONCURRENCY = 4


@dataclass
class CopyStats:
    """What a copy did; the basis of every ``--json`` summary."""

    root: Descriptor | None = None
    blobs_copied: int = 0
    blobs_skipped: int = 0
    blobs_mounted: int = 0
    bytes_copied: int = 0
    manifests_copied: int = 0
    referrers: list[str] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)  # .sig/.att/.sbom tags and bundle referrers
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict:
        return {
            "digest": self.root.digest if self.root else None,
            "mediaType": self.root.mediaType if self.root else None,
            "size": self.root.size if self.root else None,
            "blobsCopied": self.blobs_copied,
            "blobsSkipped": self.blobs_skipped,
            "blobsMounted": self.blobs_mounted,
            "bytesCopied": self.bytes_copied,
            "manifestsCopied": self.manifests_copied,
            "referrers": self.referrers,
            "signatures": self.signatures,
        }


class BlobLocks:
    """One transfer per digest among copies that share a destination.

    Artifacts of one repository share blobs (a base model, a tokenizer). Copied at once, two
    copies would both see a shared blob missing and both send it. Holding the digest's lock
    around check-and-send makes the second copy wait, then find the blob present. The lock is
    released by a ``with`` block, so a failed transfer can never leave others waiting.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, digest: str) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(digest, (threading.Lock(), 0))
            self._locks[digest] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[digest]
                if users == 1:
                    del self._locks[digest]
                else:
                    self._locks[digest] = (lock, users - 1)


def copy(
    src: Store,
    src_ref: str,
    dst: Store,
    dst_tag: str | None = None,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    referrers: bool = False,
    progress: ProgressFn | None = None,
    blob_locks: BlobLocks | None = None,
) -> CopyStats:
    """Copy the artifact ``src_ref`` names from ``src`` to ``dst`` and tag it ``dst_tag``.

    Copies running at once into the same destination pass one shared ``blob_locks``.
    """
    root = src.resolve(src_ref)
    stats = CopyStats(root=root)
    locks = blob_locks or BlobLocks()
    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="copy") as pool:
        _copy_node(src, dst, root, pool, stats, progress, referrers, locks, dst_tag)
    return stats


def copy_blob(
    src: Store,
    dst: Store,
    desc: Descriptor,
    stats: CopyStats,
    progress: ProgressFn | None = None,
    blob_locks: BlobLocks | None = None,
) -> None:
    """One blob: skip if present, mount if the destination can, else stream it across."""
    if blob_locks is None:
        _copy_blob_unlocked(src, dst, desc, stats, progress)
        return
    with blob_locks.hold(desc.digest):
        _copy_blob_unlocked(src, dst, desc, stats, progress)


def _copy_blob_unlocked(
    src: Store, dst: Store, desc: Descriptor, stats: CopyStats, progress: ProgressFn | None
) -> None:
    if dst.exists(desc):
        stats.add(blobs_skipped=1)
        if progress:
            progress("skip", desc, desc.size)
        return
    if isinstance(dst, Mounting) and dst.mount_from(desc, src):
        stats.add(blobs_mounted=1)
        if progress:
            progress("mount", desc, desc.size)
        return
    if progress:
        progress("start", desc, 0)
    if isinstance(dst, ResumableBlobSink) and isinstance(src, RangedBlobSource):
        # into a file: resumable across runs, in parts at once when large
        dst.download_blob(desc, src, on_bytes=_reporting(progress, desc))
        stats.add(blobs_copied=1, bytes_copied=desc.size)
        if progress:
            progress("done", desc, desc.size)
        return
    with counting(src.open_blob(desc), desc, progress) as reader:
        if getattr(dst, "accepts_reopen", False):
            # An interrupted upload can then restart or resume from a fresh read of the source.
            def reopen() -> BinaryIO:
                return counting(src.open_blob(desc), desc, progress)

            dst.push_blob(desc, reader, reopen=reopen)  # type: ignore[call-arg]  # probed by accepts_reopen; a named capability is issue 15
        else:
            dst.push_blob(desc, reader)
    stats.add(blobs_copied=1, bytes_copied=desc.size)
    if progress:
        progress("done", desc, desc.size)


def _reporting(progress: ProgressFn | None, desc: Descriptor) -> Callable[[int], None] | None:
    if progress is None:
        return None
    return lambda n: progress("bytes", desc, n)


def _copy_node(
    src: Store,
    dst: Store,
    desc: Descriptor,
    pool: ThreadPoolExecutor,
    stats: CopyStats,
    progress: ProgressFn | None,
    referrers: bool,
    locks: BlobLocks,
    tag: str | None = None,
) -> None:
    """Copy one manifest and what it names; the root goes out with its ``tag`` in the same
    write (one PUT on a registry, not a PUT, a GET and a second PUT to tag it)."""
    data = src.fetch_bytes(desc)
    node = parse_manifest_bytes(data, desc.mediaType)
    if not dst.exists(desc):
        if isinstance(node, Index):
            for child in node.manifests:
                if is_manifest(child):
                    _copy_node(src, dst, child, pool, stats, progress, referrers, locks)
                else:
                    copy_blob(src, dst, child, stats, progress, locks)
        else:
            _copy_blobs(src, dst, _blobs_of(node), pool, stats, progress, locks)
        dst.push_manifest(desc, data, tag)
        stats.add(manifests_copied=1)
    else:
        if isinstance(node, Manifest):
            # present with all it names (a registry or layout holds a manifest only with its
            # blobs): they count as already there, so a re-push does not read as "0 skipped"
            stats.add(blobs_skipped=len(_blobs_of(node)))
            if progress:
                for blob in _blobs_of(node):
                    progress("skip", blob, blob.size)
        if tag is not None:
            dst.push_manifest(desc, data, tag)  # the bytes are in hand: tagging is one PUT
    if referrers:
        for ref in src.referrers(desc):
            _copy_node(src, dst, ref, pool, stats, progress, referrers, locks)
            stats.referrers.append(ref.digest)
            if is_signature_referrer(ref):
                stats.signatures.append(ref.digest)
        # cosign's tag-named companions (sha256-<hex>.sig, .att, .sbom) are no referrers: carried here
        stats.signatures.extend(carry_companion_tags(
            src, dst, desc, lambda d: _copy_node(src, dst, d, pool, stats, progress, False, locks)))


def _blobs_of(manifest: Manifest) -> list[Descriptor]:
    unique: dict[str, Descriptor] = {}
    for blob in [manifest.config, *manifest.layers]:
        unique.setdefault(blob.digest, blob)
    return list(unique.values())


def _copy_blobs(src, dst, blobs, pool, stats, progress, locks) -> None:
    if progress:
        for b in blobs:  # the whole manifest's size up front, for a steady total and ETA
            progress("plan", b, 0)
    futures = [pool.submit(copy_blob, src, dst, b, stats, progress, locks) for b in blobs]
    errors = []
    for f in futures:
        try:
            f.result()
        except BaseException as e:  # collect, so that running transfers finish cleanly
            errors.append(e)
    if errors:
        raise errors[0]
