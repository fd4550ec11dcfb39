"""What planning a sync entry makes: the artifacts to copy (:class:`ArtifactPlan`) and the
entry's plan (:class:`EntryPlan`), shared by the planners of registry, layout and Ollama sources
(mirror/plan.py) and of Hub sources (mirror/hub.py), and by the run (mirror/run.py)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.mirror.endpoints import Endpoint
from ocibridge.mirror.job import ResolvedSettings, SyncEntry
from ocibridge.mirror.ratelimit import TokenBucket
from ocibridge.mirror.summary import ArtifactResult, EntrySummary
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import HeldReferrers, Store

if TYPE_CHECKING:
    from ocibridge.chunks.choice import ChunkChoice
    from ocibridge.signing.keys import PrivateKey


@dataclass
class ArtifactPlan:
    """One artifact to copy: from ``store`` (the source, or a converting view of it)."""

    result: ArtifactResult
    store: Store
    src_ref: str  # digest (or the built artifact's reference) to copy
    tag: str | None  # target tag; None pushes by digest only
    referrers: bool = True
    #: blobs a converted artifact shares with the source, mounted from there (same registry)
    mounts: dict[str, Store] = field(default_factory=dict)
    #: when the copy starts, (the store to copy from, the reference) in place of ``store`` and
    #: ``src_ref``: a Hub revision is downloaded then, not at planning (mirror/hub.py)
    prepare: Callable[[], tuple[Store, str]] | None = None
    #: tags pointed at the copied manifest once ``tag`` is written (a Hub revision's moving tag)
    also_tags: list[str] = field(default_factory=list)
    #: the source manifest read (before any conversion): the provenance's dependency; None: a
    #: Hub revision (its files and commit, as the built manifest's annotations name them)
    read: Descriptor | None = None
    #: what the plan read of the artifact to copy (from ``store``), handed to the copy so it asks
    #: the source for none of it again: the root's descriptor (no second resolve), the manifests
    #: by digest (verified bytes) and the referrer listings by their subject's digest
    root: Descriptor | None = None
    in_hand: dict[str, bytes] = field(default_factory=dict)
    listed: dict[str, HeldReferrers] = field(default_factory=dict)


@dataclass
class EntryPlan:
    index: int
    entry: SyncEntry
    settings: ResolvedSettings
    summary: EntrySummary
    source: Endpoint | None = None
    target: Endpoint | None = None
    copies: list[ArtifactPlan] = field(default_factory=list)
    results: list[ArtifactResult] = field(default_factory=list)  # skipped and failed ones
    bucket: TokenBucket | None = None
    policy: Any = None  # VerifyPolicy of the entry's ``verify`` block
    policy_file: str | None = None  # the containers policy file (--policy); None: the one found
    attest_key: PrivateKey | None = None  # the entry's attest_key, loaded before a target is opened
    scan_key: PrivateKey | None = None  # the entry's scan_key, loaded (and the scanner found) as attest_key
    #: the source repository's tags, where the entry listed them (no reference named): cosign's
    #: companion tags are looked for among them, not asked about one by one (mirror/graphwalk.py)
    source_tags: frozenset[str] | None = None
    #: a Hub entry's chunk keys as the job resolves them (the table each revision binds): its
    #: provenance records those set; None for other sources, which copy an artifact as it is
    chunks: ChunkChoice | None = None
    #: where artifacts converted by an exporter (ModelCar, Ollama) wait for their copy
    scratch: list[tempfile.TemporaryDirectory[str]] = field(default_factory=list)

    def close(self) -> None:
        for endpoint in (self.source, self.target):
            if endpoint is not None:
                endpoint.close()
        for folder in self.scratch:
            folder.cleanup()
        self.scratch.clear()

    def scratch_dir(self) -> Path:
        """A new empty folder, removed when the plan is closed."""
        folder = tempfile.TemporaryDirectory(prefix="ocibridge-mirror-")
        self.scratch.append(folder)
        return Path(folder.name) / "layout"
