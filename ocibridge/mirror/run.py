"""Executing a mirror job: plan each entry, then copy its artifacts with bounded concurrency.

Every artifact is one :func:`ocibridge.copy.copy` pinned to the planned digest, so blobs the
target holds are HEAD-skipped, blobs of the same registry are mounted, and the tag is written
only after the whole graph is there. That is what makes a killed job safe to re-run: what
finished is skipped, what did not is sent again, nothing half-done is ever tagged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ..copy import BlobLocks, copy
from ..errors import OcibridgeError
from ..stores.base import Store
from .job import MirrorJob
from .plan import ArtifactPlan, EntryPlan, plan_entry
from .summary import ArtifactResult, MirrorSummary

ProgressCallback = Callable[[str, ArtifactResult], None]
"""Called as ``progress(event, result)``; event is ``planned``, ``skipped``, ``copied`` or ``failed``.
A copy is reported when it finishes (from a worker thread, one call at a time)."""


def run_job(job: MirrorJob, *, dry_run: bool = False, progress: ProgressCallback | None = None) -> MirrorSummary:
    """Run (or, with ``dry_run``, only plan) every sync entry; never raises for one artifact."""
    started = time.monotonic()
    summary = MirrorSummary(dry_run=dry_run)
    for index, entry in enumerate(job.sync):
        plan = plan_entry(job, index, entry, dry_run=dry_run)
        try:
            summary.entries.append(plan.summary)
            for result in plan.results:
                _emit(progress, result)
            summary.artifacts.extend(plan.results)
            if dry_run:
                for item in plan.copies:
                    _emit(progress, item.result)
                    summary.artifacts.append(item.result)
            else:
                summary.artifacts.extend(_execute(plan, progress))
        finally:
            plan.close()
    summary.seconds = time.monotonic() - started
    return summary


def _emit(progress: ProgressCallback | None, result: ArtifactResult) -> None:
    if progress is not None:
        progress(result.status, result)


def _execute(plan: EntryPlan, progress: ProgressCallback | None) -> list[ArtifactResult]:
    if not plan.copies:
        return []
    assert plan.target is not None
    conc = plan.settings.concurrency
    target = plan.target.store
    locks = BlobLocks()  # copies of one entry share blobs: each is sent once
    said = threading.Lock()  # one report at a time, each as soon as its artifact is done

    def one(item: ArtifactPlan) -> ArtifactResult:
        result = _copy_one(target, item, conc.blobs, locks)
        with said:
            _emit(progress, result)
        return result

    with ThreadPoolExecutor(max_workers=conc.artifacts, thread_name_prefix="mirror") as pool:
        return list(pool.map(one, plan.copies))


def _copy_one(target: Store, item: ArtifactPlan, blobs: int, locks: BlobLocks) -> ArtifactResult:
    result = item.result
    try:
        stats = copy(item.store, item.src_ref, target, item.tag,
                     concurrency=blobs, referrers=item.referrers, blob_locks=locks)
    except OcibridgeError as e:
        result.status, result.reason = "failed", str(e)
        return result
    except Exception as e:  # an unexpected bug must not hide the other artifacts' results
        result.status, result.reason = "failed", f"{type(e).__name__}: {e}"
        return result
    result.status = "copied"
    result.blobs_copied = stats.blobs_copied
    result.blobs_mounted = stats.blobs_mounted
    result.blobs_skipped = stats.blobs_skipped
    result.bytes_copied = stats.bytes_copied
    result.manifests_copied = stats.manifests_copied
    result.referrers = len(stats.referrers)
    result.signatures = len(stats.signatures)
    return result
