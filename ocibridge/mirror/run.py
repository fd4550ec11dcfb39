"""Executing a mirror job: plan each entry, then copy its artifacts with bounded concurrency.

Every artifact is one :func:`ocibridge.transfer.copy.copy` pinned to the planned digest, so blobs the
target holds are HEAD-skipped, blobs of the same registry are mounted, and the tag is written
only after the whole graph and its referrers are there. That is what makes a killed job safe to
re-run: what finished is skipped, what did not is sent again, nothing half-done is ever tagged
(and a tag an older run wrote before its referrers is completed: mirror/graphwalk.py).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

from ocibridge.errors import OcibridgeError, error_text, os_error_text
from ocibridge.kinds.hf.checkedhub import checked_hub
from ocibridge.mirror.job import MirrorJob
from ocibridge.mirror.plan import plan_entry
from ocibridge.mirror.planned import ArtifactPlan, EntryPlan
from ocibridge.mirror.shard import Shard
from ocibridge.mirror.siblings import offer_mounts, sibling_repositories
from ocibridge.mirror.summary import ArtifactResult, MirrorSummary
from ocibridge.oci.models import Descriptor
from ocibridge.signing.attach import SignatureCompanions
from ocibridge.stores.base import WritableStore
from ocibridge.transfer.bloblocks import BlobLocks
from ocibridge.transfer.copy import CopyHooks, copy
from ocibridge.transfer.progress_events import ProgressFn
from ocibridge.transfer.writer import retag

ProgressCallback = Callable[[str, ArtifactResult], None]
"""Called as ``progress(event, result)``; event is ``planned``, ``skipped``, ``copied`` or ``failed``.
A copy is reported when it finishes (from a worker thread, one call at a time)."""


def run_job(job: MirrorJob, *, dry_run: bool = False, progress: ProgressCallback | None = None,
            shard: Shard | None = None, blob_progress: ProgressFn | None = None) -> MirrorSummary:
    """Run (or, with ``dry_run``, only plan) every sync entry, or only the artifacts ``shard``
    owns (see :mod:`.shard`); never raises for one artifact. ``blob_progress`` hears every
    copy's blob events, as a push's bar does."""
    if any(job.effective(entry).scan is not None for entry in job.sync):
        from ocibridge.scanning import scanner

        scanner()  # without ocibridge[scan]: one line, before anything is opened
    started = time.monotonic()
    summary = MirrorSummary(dry_run=dry_run, shard=shard, job_digest=job.digest() if shard else None)
    for index, entry in enumerate(job.sync):
        with (checked_hub(job.hub_endpoint(entry), xet=job.hub_xet(entry)) if entry.from_hub
              else contextlib.nullcontext()) as xet_said:
            plan = plan_entry(job, index, entry, dry_run=dry_run, shard=shard)
            try:
                if xet_said is not None:
                    plan.summary.notes.append(xet_said)
                summary.entries.append(plan.summary)
                for result in plan.results:
                    _emit(progress, result)
                summary.artifacts.extend(plan.results)
                if dry_run:
                    for item in plan.copies:
                        _emit(progress, item.result)
                        summary.artifacts.append(item.result)
                else:
                    siblings = sibling_repositories(job, index) if shard is not None and shard.count > 1 else []
                    summary.artifacts.extend(_execute(plan, progress, siblings, blob_progress))
            finally:
                plan.close()
    summary.seconds = time.monotonic() - started
    summary.finished_at = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    return summary


def _emit(progress: ProgressCallback | None, result: ArtifactResult) -> None:
    if progress is not None:
        progress(result.status, result)


def _execute(plan: EntryPlan, progress: ProgressCallback | None, siblings: list[str],
             blob_progress: ProgressFn | None = None) -> list[ArtifactResult]:
    """Copy the planned artifacts; ``siblings``: repositories of the target registry other shards
    may have written a blob to, offered as mount sources (see :mod:`.siblings`)."""
    if not plan.copies:
        return []
    assert plan.target is not None
    conc = plan.settings.concurrency
    try:
        target = plan.target.writable()  # a layout target is made here, for its first copy
    except (OcibridgeError, OSError) as e:  # it cannot be made: each artifact fails, the other entries run
        reason = (error_text(e) if isinstance(e, OcibridgeError)
                  else f"cannot make {plan.target.name}: {e.filename or plan.target.name}: {e.strerror or e}")
        for item in plan.copies:
            item.result.status, item.result.reason = "failed", reason
            _emit(progress, item.result)
        return [item.result for item in plan.copies]
    if not isinstance(target, WritableStore):  # only a dry run's target that is not there yet
        raise OcibridgeError(f"{plan.target.name}: nothing can be written there")
    locks = BlobLocks()  # copies of one entry share blobs: each is sent once
    said = threading.Lock()  # one report at a time, each as soon as its artifact is done

    def one(item: ArtifactPlan) -> ArtifactResult:
        offer_mounts(target, [d for d, _, action in item.result.blob_actions if action == "send"], siblings)
        result = _copy_one(target, item, conc.blobs, locks, plan, blob_progress)
        with said:
            _emit(progress, result)
        return result

    with ThreadPoolExecutor(max_workers=conc.artifacts, thread_name_prefix="mirror") as pool:
        return list(pool.map(one, plan.copies))


def _places_written(target: WritableStore) -> list[str]:
    """The disks a copy writes to: the target's layout, and the cache."""
    from ocibridge.core.environment import cache_root
    from ocibridge.stores.layout import LayoutStore

    layout = [str(target.root.absolute())] if isinstance(target, LayoutStore) else []
    return [*layout, f"the cache {cache_root()}"]


def _copy_one(target: WritableStore, item: ArtifactPlan, blobs: int, locks: BlobLocks,
              plan: EntryPlan, blob_progress: ProgressFn | None = None) -> ArtifactResult:
    result = item.result
    sent = threading.Lock()

    def record(event: str, desc: Descriptor, n: int) -> None:
        if event == "done":  # uploaded by this run: the report lists it, so duplicates across shards show
            with sent:
                result.blobs_sent.append(desc.digest)
        if blob_progress is not None:
            blob_progress(event, desc, n)

    attached: list[int] = []  # the chunk table's referrer: 0 or 1

    def before_tag(root: Descriptor) -> None:
        """What the run attaches to the copy, written before its tag (the copy's last write)."""
        if plan.settings.scan is not None:  # first: a refused copy gets nothing more, and no tag
            from ocibridge.mirror.scandoor import scan_copy

            result.scan = scan_copy(plan, target, root)
        attached.append(_attach_built_table(store, target))
        if plan.settings.provenance:  # the copy is there: then what made it
            from ocibridge.mirror.provenance import attach_provenance

            result.provenance = attach_provenance(plan, item, target, root)

    try:
        root: str | Descriptor
        if item.prepare is not None:  # made when the copy starts: nothing read of it yet
            store, root = item.prepare()
        else:  # what the plan read of it is handed down, not asked of the source again
            store, root = item.store, item.root or item.src_ref
        stats = copy(store, root, target, item.tag,
                     concurrency=blobs, referrers=item.referrers, blob_locks=locks, progress=record,
                     hooks=CopyHooks(mounts=item.mounts, in_hand=item.in_hand, listed=item.listed,
                                     companions=SignatureCompanions() if item.referrers else None,
                                     before_tag=before_tag if _attaches(plan, store) else None))
        item.in_hand, item.listed = {}, {}  # copied: the entry's other copies need none of it
        if item.also_tags and stats.root is not None:
            retag(target, stats.root, item.also_tags)
    except OcibridgeError as e:
        result.status, result.reason = "failed", error_text(e)
        return result
    except OSError as e:  # a full disk, a directory not writable: said as every command says it
        result.status, result.reason = "failed", os_error_text(e, _places_written(target))
        return result
    except Exception as e:  # an unexpected bug must not hide the other artifacts' results
        result.status, result.reason = "failed", f"{type(e).__name__}: {e}"
        return result
    result.status = "copied"
    if result.digest is None and stats.root is not None:  # built when the copy started (a Hub revision)
        result.digest = stats.root.digest
    result.blobs_copied = stats.blobs_copied
    result.blobs_mounted = stats.blobs_mounted
    result.blobs_skipped = stats.blobs_skipped
    result.bytes_copied = stats.bytes_copied
    result.manifests_copied = stats.manifests_copied
    result.referrers = len(stats.referrers) + sum(attached) + (result.scan is not None)
    result.signatures = len(stats.signatures)
    return result


def _attaches(plan: EntryPlan, store: object) -> bool:
    """Whether the run may attach something to the copy (its tag then waits for it: one more
    PUT): provenance, a scan report, or a built artifact's chunk table (known once the copy has hashed its files)."""
    from ocibridge.model.builder import PlannedArtifact

    return plan.settings.provenance or plan.settings.scan is not None or isinstance(store, PlannedArtifact)


def _attach_built_table(store: object, target: WritableStore) -> int:
    """A Hub revision's artifact, built as ``push hf:`` builds it (kinds/hf/artifact.py), binds
    push's chunk table: attached here as its referrer, as push's delivery attaches it
    (model/deliver.py), so the mirror holds push's artifact in full. The referrers attached (0 or 1)."""
    from ocibridge.model.builder import PlannedArtifact

    if not isinstance(store, PlannedArtifact):  # copied from a store: its referrers went with the copy
        return 0
    from ocibridge.model.deliver import attach_bound_table

    return 1 if attach_bound_table(store, target) else 0
