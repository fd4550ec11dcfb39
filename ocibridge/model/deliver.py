"""A built artifact written into a store: the one copy, then the chunk table it binds attached as
a referrer. What ``push`` does once it has its :class:`PlannedArtifact`, and what serve's commit
does with the artifact :func:`ocibridge.model.known.plan_known` made (untagged first when the
commit is signed before its branch's tag moves), and ``copy hf:ORG/NAME`` with the artifact
a push of it builds (kinds/hf/artifact.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ocibridge.model.builder import ARTIFACT_TAG, PlannedArtifact
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import Store, WritableStore
from ocibridge.transfer.copy import DEFAULT_CONCURRENCY, CopyHooks, CopyStats, copy
from ocibridge.transfer.progress import ProgressFn


@dataclass(frozen=True)
class Delivered:
    """What a delivery wrote: the manifest, the copy's counts and, when the manifest binds a
    chunk table, the table's and its referrer's digests (push's ``extra["chunks"]``)."""

    descriptor: Descriptor
    stats: CopyStats
    chunks: Mapping[str, Any] = field(default_factory=dict)


def deliver(artifact: PlannedArtifact, store: WritableStore, tag: str | None, *,
            concurrency: int = DEFAULT_CONCURRENCY, progress: ProgressFn | None = None,
            mounts: Mapping[str, Store] | None = None) -> Delivered:
    """Copy ``artifact`` into ``store`` under ``tag`` (None: by digest only), taking back what a
    failed copy added; then attach the chunk table its manifest binds. ``mounts``: digest -> a
    store the destination may mount that blob from."""
    stats = copy(artifact, ARTIFACT_TAG, store, tag, concurrency=concurrency,
                 progress=progress,
                 hooks=CopyHooks(mounts=mounts or {}, undo_on_failure=True))
    return Delivered(artifact.descriptor, stats, attach_bound_table(artifact, store))


def attach_bound_table(artifact: PlannedArtifact, store: WritableStore) -> dict[str, Any]:
    """Once ``artifact``'s manifest is in ``store``: the chunk table it binds attached there as
    its referrer (the table's digest, the referrer's and the count of layers it covers; empty
    when it binds none). Push's and serve's delivery, and a mirror job's copy of a Hub revision
    (which copies with its own locks and hooks), attach it here alike."""
    descriptor = artifact.descriptor
    table = artifact.table
    if table is None or not table.layers:
        return {}
    from ocibridge.chunks.attach import attach_table

    subject = Descriptor(mediaType=descriptor.mediaType, digest=descriptor.digest, size=descriptor.size)
    attached = attach_table(store, subject, table)
    return {"table": table.descriptor().digest, "referrer": attached.digest, "layers": len(table.layers)}
