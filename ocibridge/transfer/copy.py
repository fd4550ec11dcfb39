"""The one graph copy: push, pull-to-store, ``copy``, exports and mirror jobs all run through it.

Walks the manifest graph from a root, copies every blob the destination lacks (bounded
concurrency, streamed, verified by the destination), children before parents so that a
manifest never points at something missing, then the root's referrers, then tags the root: the
tag is the last write, so no tag names an artifact a killed copy left incomplete.

What a caller knows beyond the two stores travels as :class:`CopyHooks`: blobs to mount from
another store of the destination's server, and whether a failed copy takes back what it added.
A source with blobs of unknown digest (a push's new files, :class:`PendingBlobs`) has them
ingested first by a destination that can (:class:`Ingesting`), each file read once. Every count
of a transfer is made here, in :class:`CopyStats`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from ocibridge.core.graphbound import GraphBound
from ocibridge.core.lazyimport import LazyModule
from ocibridge.errors import NotFound, OcibridgeError
from ocibridge.oci.models import Descriptor, Index, Manifest, parse_manifest_bytes
from ocibridge.stores.base import (
    CopyTarget,
    HeldReferrers,
    Ingesting,
    IngestingVouched,
    KeepsReferrers,
    Mounting,
    PendingBlob,
    PendingBlobs,
    ReadableStore,
    Store,
    Transactional,
    VerifiedFile,
    WritableStore,
    is_manifest,
    referrers_read,
)
from ocibridge.stores.ranged import RangedBlobSource, ResumableBlobSink
from ocibridge.transfer.bloblocks import BlobLocks
from ocibridge.transfer.copystats import CopyStats as CopyStats  # what a copy did; its users import it here
from ocibridge.transfer.defaults import DEFAULT_CONCURRENCY as DEFAULT_CONCURRENCY  # its users import it here
from ocibridge.transfer.progress import ProgressFn, counting

if TYPE_CHECKING:
    from ocibridge.transfer import askfirst
else:  # a push's way of sending new files (and its sample index, sqlite3): loaded by the first push
    askfirst = LazyModule("ocibridge.transfer.askfirst")

Successors = Callable[[Descriptor, bytes], list[Descriptor]]


def successors(desc: Descriptor, data: bytes) -> list[Descriptor]:
    """What an OCI or Docker manifest or index names, each digest once."""
    node = parse_manifest_bytes(data, desc.mediaType)
    return list(node.manifests) if isinstance(node, Index) else _blobs_of(node)


class Companions(Protocol):
    """Content that goes with a manifest beside its referrers, named by the layer that knows it."""

    def is_signature(self, desc: Descriptor) -> bool:
        """Whether a referrer is a signature (counted in :attr:`CopyStats.signatures`)."""
        ...

    def carry(self, src: Store, dst: WritableStore, subject: Descriptor,
              copy_manifest: Callable[[Descriptor], None], stats: CopyStats) -> list[str]:
        """Copy what goes with ``subject`` that is no referrer; digests of what was carried.
        What it writes itself, beside ``copy_manifest``, is counted in ``stats``."""
        ...


@dataclass(frozen=True)
class CopyHooks:
    """What the caller of a copy knows that neither store can tell it.

    ``mounts``: digest -> another store holding that blob, from which the destination may
    mount it (an Ollama model's blobs, kept under their digests in a push of its ModelPack
    form). ``undo_on_failure``: a destination that can (:class:`Transactional`) takes back the
    blobs a failed copy added. ``ingest``: blobs of unknown digest go through the destination's
    ingest (one read per byte); off, the source hashes them first.
    """

    mounts: Mapping[str, Store] = field(default_factory=dict)
    undo_on_failure: bool = False
    ingest: bool = True
    #: what a manifest names (as oras-go's FindSuccessors): a manifest, its config and layers;
    #: an index, its entries. A source in a shape of its own (an Ollama manifest) says it here.
    successors: Successors | None = None
    #: with ``referrers``: what travels with a manifest without being a referrer of it (cosign's
    #: tag-named signatures), and which referrers are signatures. The signing layer supplies it
    #: (:class:`ocibridge.signing.attach.SignatureCompanions`), so the copy knows no signature.
    companions: Companions | None = None
    #: manifests the caller has already read and checked against their digests (a pull's root,
    #: read by the family check): taken as they are, not read from the source again
    in_hand: Mapping[str, bytes] = field(default_factory=dict)
    #: with ``referrers``: the referrers of a manifest (by its digest) the caller has already
    #: listed from the source, with what the listing read (a mirror's plan): not listed again
    listed: Mapping[str, HeldReferrers] = field(default_factory=dict)
    #: what the caller writes beside the root once it and its referrers are there, given the
    #: root (a mirror's chunk table of a built artifact, its provenance): before the root's tag,
    #: which stays the last write
    before_tag: Callable[[Descriptor], None] | None = None


def copy(
    src: Store,
    src_ref: str | Descriptor,
    dst: CopyTarget,
    dst_tag: str | None = None,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    referrers: bool = False,
    progress: ProgressFn | None = None,
    blob_locks: BlobLocks | None = None,
    hooks: CopyHooks | None = None,
) -> CopyStats:
    """Copy the artifact ``src_ref`` names (a reference, or the descriptor it resolved to)
    from ``src`` to ``dst`` and tag it ``dst_tag``.

    Copies running at once into the same destination pass one shared ``blob_locks``. A source's
    pending blobs are ingested only under a new tag: when the tag exists (a re-push, an update)
    the source hashes its files first, so blobs the destination holds are skipped by a HEAD
    instead of sent again.
    """
    hooks = hooks or CopyHooks()
    stats = CopyStats()
    with _undo_on_failure(dst, hooks), \
            ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="copy") as pool:
        run = _Copy(src, dst, pool, stats, progress, referrers, blob_locks or BlobLocks(), hooks)
        if isinstance(src, PendingBlobs):
            pending = src.pending_blobs()
            # into a registry only large files on disk are sent while hashed: with none, no tag HEAD
            if hooks.ingest and isinstance(dst, Ingesting) \
                    and (not dst.ingest_sends_unasked() or any(askfirst.indexed(b) for b in pending)) \
                    and not _tag_exists(dst, dst_tag):
                if dst.ingest_sends_unasked():  # a registry: known content asked, new sent as hashed
                    run.ask_or_ingest(dst, pending)
                else:
                    run.ingest(dst, pending)
            else:  # digests first, so the destination is asked before any byte is sent
                run.hash_pending(pending)
        root = src_ref if isinstance(src_ref, Descriptor) else src.resolve(src_ref)
        stats.root = root
        run.node(root, dst_tag)
    return stats


def _undo_on_failure(dst: CopyTarget, hooks: CopyHooks) -> AbstractContextManager[None]:
    if hooks.undo_on_failure and isinstance(dst, Transactional):
        return dst.removing_new_blobs_on_failure()
    return nullcontext()


def _tag_exists(dst: CopyTarget, tag: str | None) -> bool:
    """Whether ``tag`` names something in ``dst`` already (True when there is no tag: a copy
    pinned by digest goes the careful way, as an update does; and when ``dst`` cannot say)."""
    if tag is None or not isinstance(dst, ReadableStore):
        return True
    try:
        dst.resolve(tag)
    except NotFound:
        return False
    return True


class _Copy:
    """One copy's state: the two stores, the pool, the counts, and blobs already settled."""

    def __init__(self, src: Store, dst: CopyTarget, pool: ThreadPoolExecutor,
                 stats: CopyStats, progress: ProgressFn | None, referrers: bool,
                 locks: BlobLocks, hooks: CopyHooks):
        self.src, self.dst, self.pool, self.stats = src, dst, pool, stats
        self.progress, self.referrers, self.locks, self.hooks = progress, referrers, locks, hooks
        self.ingested: set[str] = set()  # digests the destination took by ingest in this copy
        self.mounted: set[str] = set()  # digests mounted while pending files were placed
        self._lock = threading.Lock()  # guards the two sets above
        self.graph = GraphBound(f"copy of {src.describe()}")  # each manifest once, bounded

    # -- blobs of unknown digest ------------------------------------------------------------------
    def ingest(self, dst: Ingesting, pending: list[PendingBlob]) -> None:
        """Send each pending blob while hashing it (one read per byte), then tell the source its
        digest. Equal files are one blob: counted once, though each was read and sent."""
        if self.progress:
            for blob in pending:
                self.progress("plan", blob.key, 0)
        _all(self.pool.submit(self._ingest_one, dst, blob) for blob in pending)

    def _ingest_one(self, dst: Ingesting, blob: PendingBlob) -> None:
        progress = self.progress

        def reopen() -> BinaryIO:
            return counting(blob.open(), blob.key, progress)

        with reopen() as reader:
            if blob.vouched is not None and isinstance(dst, IngestingVouched):
                dst.ingest_vouched(blob.vouched, reader)  # the stream checks its digest itself
                digest, size = blob.vouched.digest, blob.vouched.size
            else:
                digest, size = dst.ingest_blob(reader, reopen=reopen, source_path=blob.source_path)
        blob.settle(digest, size)
        with self._lock:
            new = digest not in self.ingested
            self.ingested.add(digest)
        self.stats.add(blobs_copied=int(new), bytes_copied=size)
        if progress:
            progress("done", blob.key, size)

    def ask_or_ingest(self, dst: Ingesting, pending: list[PendingBlob]) -> None:
        """Into a store that sends what it ingests (a registry): a file whose content
        the sample index knows is asked about and confirmed locally (nothing sent), one of new
        content is sent while hashed (one read); a small one is hashed first and asked about
        (transfer/askfirst.py says why each)."""
        def held(desc: Descriptor) -> bool:
            if self.dst.exists(desc):
                return True
            if isinstance(self.dst, Mounting) and self._mount(self.dst, desc):
                with self._lock:
                    self.mounted.add(desc.digest)  # counted as mounted when the manifest names it
                return True
            return False

        def send(blob: PendingBlob) -> None:
            if self.progress:
                self.progress("plan", blob.key, 0)
            self._ingest_one(dst, blob)

        from ocibridge.transfer.repohints import RepositoryHints

        hints = RepositoryHints(self.dst) if isinstance(self.dst, ReadableStore) else None

        def place(group: list[PendingBlob]) -> None:
            for blob in group:
                askfirst.place(blob, held, send, hints)

        indexed = [blob for blob in pending if askfirst.indexed(blob)]
        _all([*(self.pool.submit(place, group) for group in askfirst.by_sample(indexed)),
              *(self.pool.submit(self._hash_one, blob) for blob in pending if not askfirst.indexed(blob))])

    def hash_pending(self, pending: list[PendingBlob]) -> None:
        """Hash each pending blob (in the pool, files at once) and tell the source its digest.
        A second read to send a missing blob comes from the page cache (see docs/benchmarks.md)."""
        _all(self.pool.submit(self._hash_one, blob) for blob in pending)

    @staticmethod
    def _hash_one(blob: PendingBlob) -> None:
        blob.settle(*askfirst.hash_whole(blob))

    # -- blobs ------------------------------------------------------------------------------------
    def blob(self, desc: Descriptor) -> None:
        """One blob: skip if placed by this copy or a sibling, mount if the destination can,
        skip if present, else stream it across."""
        with self.locks.hold(desc.digest):
            if self.locks.placed(desc.digest):
                self.stats.add(blobs_skipped=1)
                if self.progress:
                    self.progress("skip", desc, desc.size)
                return
            self._blob(desc)
            self.locks.mark_placed(desc.digest)

    def _blob(self, desc: Descriptor) -> None:
        src, dst, progress, stats = self.src, self.dst, self.progress, self.stats
        if desc.digest in self.ingested:  # sent and counted by ingest a moment ago
            if progress:
                progress("skip", desc, desc.size)
            return
        if desc.digest in self.mounted:  # mounted for a file confirmed as known content
            stats.add(blobs_mounted=1)
            if progress:
                progress("mount", desc, desc.size)
            return
        # A mount comes before the existence check: the registry answers it 201 whether it
        # links the blob now or held it already, so a mounted blob costs one request, not a
        # HEAD and a POST. A store with nowhere to mount from sends nothing and says no.
        if isinstance(dst, Mounting) and self._mount(dst, desc):
            stats.add(blobs_mounted=1)
            if progress:
                progress("mount", desc, desc.size)
            return
        if dst.exists(desc):
            stats.add(blobs_skipped=1)
            if progress:
                progress("skip", desc, desc.size)
            return
        if progress:
            progress("start", desc, 0)
        if isinstance(dst, ResumableBlobSink) and isinstance(src, RangedBlobSource):
            # into a file: resumable across runs, in parts at once when large
            dst.download_blob(desc, src, on_bytes=_reporting(progress, desc))
        else:
            def reopen() -> BinaryIO:
                # an interrupted upload restarts or resumes from a fresh read of the source
                blob = src.open_blob(desc)
                if isinstance(blob, VerifiedFile):  # a file the destination may link: as it is
                    return blob
                return counting(blob, desc, progress)

            with reopen() as reader:
                dst.push_blob(desc, reader, reopen=reopen)
        stats.add(blobs_copied=1, bytes_copied=desc.size)
        if progress:
            progress("done", desc, desc.size)

    def _mount(self, dst: Mounting, desc: Descriptor) -> bool:
        other = self.hooks.mounts.get(desc.digest)  # the caller knows better where it lives
        return dst.mount_from(desc, self.src if other is None else other)

    def blobs(self, blobs: list[Descriptor]) -> None:
        if self.progress:
            for b in blobs:  # the whole manifest's size up front, for a steady total and ETA
                self.progress("plan", b, 0)
        _all(self.pool.submit(self.blob, b) for b in blobs)

    # -- manifests --------------------------------------------------------------------------------
    def node(self, desc: Descriptor, tag: str | None = None, referrers: bool | None = None,
             depth: int = 0, data: bytes | None = None) -> bool:
        """Copy one manifest and what it names; the root goes out with its ``tag`` in the same
        write (one PUT on a registry, not a PUT, a GET and a second PUT to tag it), unless it has
        referrers to carry: then the tag is the last write, after them (the manifest by digest
        first, as a referrer's ``subject`` names it), so a copy killed midway leaves no tag
        naming an artifact without its referrers, and a re-run finds the tag missing and ends it.
        What goes with a manifest without naming it (cosign's tag-named companions) is carried
        before the manifest is written, for the same reason.

        Each manifest is walked once per copy (a diamond or a cycle of referrers and fallback
        tags costs one visit per node, not one per path), within the bounds of
        core/graphbound.py; returns whether this call walked it (False: it was already).
        ``data``: its bytes, verified, where the caller read them (a referrer, as its listing did)."""
        src, dst, stats, progress = self.src, self.dst, self.stats, self.progress
        referrers = self.referrers if referrers is None else referrers
        if not self.graph.enter(f"{int(referrers)}{desc.digest}", depth) and tag is None:
            return False
        # The destination is asked whether it holds the manifest while the source sends it: two
        # answers apart (a HEAD and a GET to one registry) cost one round trip, not two.
        present = self.pool.submit(dst.exists, desc)
        try:
            data = data or self.hooks.in_hand.get(desc.digest) or src.fetch_bytes(desc)
        except BaseException:
            _settle(present)
            raise
        children = (self.hooks.successors or successors)(desc, data)
        graph = any(is_manifest(child) for child in children)  # an index: manifests below it
        held: HeldReferrers | None = None
        if referrers:
            held = self.hooks.listed.get(desc.digest)
            if held is None:
                held = referrers_read(src, desc)
            self._companions(desc, depth)
        after = (held is not None and bool(held.listed)) or (depth == 0 and self.hooks.before_tag is not None)
        tag_last = tag if after else None  # the name goes last, after what goes with the manifest
        if tag_last is not None:
            tag = None
        if not present.result():
            if graph:
                for child in children:
                    if is_manifest(child):
                        self.node(child, depth=depth + 1)
                    else:
                        self.blob(child)
            else:
                self.blobs(children)
            dst.push_manifest(desc, data, tag)
            stats.add(manifests_copied=1)
        else:
            if graph and held is not None:  # an index there already: what goes with its manifests may not be
                for child in children:
                    if is_manifest(child):
                        self.node(child, depth=depth + 1)
            if not graph:
                # present with all it names (a registry or layout holds a manifest only with its
                # blobs): they count as already there, so a re-push does not read as "0 skipped"
                # (each blob once: one this copy ingested a moment ago is counted as uploaded)
                fresh = [blob for blob in children if blob.digest not in self.ingested]
                stats.add(blobs_skipped=len(fresh))
                if progress:
                    for blob in fresh:
                        progress("skip", blob, blob.size)
            if tag is not None:
                dst.push_manifest(desc, data, tag)  # the bytes are in hand: tagging is one PUT
            elif tag_last is None and isinstance(dst, KeepsReferrers):
                dst.keep_referrer(desc, data)  # a referrer there from before its tag: tagged now
        if held is not None:
            companions = self.hooks.companions
            for ref in held:
                if not self.node(ref, depth=depth + 1, data=held.known(ref)):
                    continue
                stats.referrers.append(ref.digest)
                if companions is not None and companions.is_signature(ref):
                    stats.signatures.append(ref.digest)
        if depth == 0 and self.hooks.before_tag is not None:
            self.hooks.before_tag(desc)
        if tag_last is not None:  # the manifest and all that goes with it are there: now its name
            dst.push_manifest(desc, data, tag_last)
        return True

    def _companions(self, desc: Descriptor, depth: int) -> None:
        """Carry what goes with ``desc`` without naming it (cosign's tag-named signatures)."""
        companions = self.hooks.companions
        if companions is None:
            return
        dst = self.dst
        if not isinstance(dst, WritableStore):
            raise OcibridgeError(f"{dst.describe()} cannot hold what goes with a manifest (signatures)")

        def companion(d: Descriptor) -> None:
            self.node(d, referrers=False, depth=depth + 1)

        self.stats.signatures.extend(companions.carry(self.src, dst, desc, companion, self.stats))


def _reporting(progress: ProgressFn | None, desc: Descriptor) -> Callable[[int], None] | None:
    if progress is None:
        return None
    return lambda n: progress("bytes", desc, n)


def _blobs_of(manifest: Manifest) -> list[Descriptor]:
    unique: dict[str, Descriptor] = {}
    for blob in [manifest.config, *manifest.layers]:
        unique.setdefault(blob.digest, blob)
    return list(unique.values())


def _settle(future: Future[Any]) -> None:
    """Wait for ``future`` and drop its outcome: an error raised beside it goes first."""
    with suppress(BaseException):
        future.result()


def _all(futures: Iterable[Future[None]]) -> None:
    """Wait for every future; the first failure is raised once all have ended, so running
    transfers finish cleanly."""
    errors = []
    for f in list(futures):
        try:
            f.result()
        except BaseException as e:  # noqa: BLE001 - collected, raised below
            errors.append(e)
    if errors:
        raise errors[0]
