"""What a mirror job did, as frozen values for the Python API.

The run fills in a :class:`~ocibridge.mirror.summary.MirrorSummary` while it works, and the merge
of shard reports a :class:`~ocibridge.mirror.merge.MergedReport`; a caller gets a snapshot of
either, taken from its ``--json`` form (one source of truth: ``as_dict()`` is exactly what the
command prints, ``format_text()`` its text, ``exit_code`` its exit status).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ocibridge.mirror.shard import Shard
from ocibridge.mirror.summary import Status, artifact_json

if TYPE_CHECKING:
    from ocibridge.mirror.merge import MergedReport
    from ocibridge.mirror.summary import ArtifactResult, MirrorSummary


@dataclass(frozen=True)
class MirroredArtifact:
    """One artifact of one sync entry: ``status`` is ``copied``, ``skipped``, ``failed`` or
    ``planned`` (a plan would copy it); the other counts are in :meth:`as_dict`."""

    entry: int  # index of its sync entry in the job
    source: str
    target: str
    status: Status
    digest: str | None
    reason: str  # why skipped or failed
    note: str
    blobs_planned: int
    bytes_planned: int
    blobs_copied: int
    blobs_mounted: int
    blobs_skipped: int
    bytes_copied: int
    signatures: int
    provenance: str | None  # the provenance referrer attached (provenance = true)
    lost: tuple[str, ...]  # converted into another family: what did not survive
    data: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MirroredArtifact:
        return cls(
            entry=data["entry"], source=data["source"], target=data["target"], status=data["status"],
            digest=data["digest"], reason=data["reason"], note=data["note"],
            blobs_planned=data["blobsPlanned"], bytes_planned=data["bytesPlanned"],
            blobs_copied=data["blobsCopied"], blobs_mounted=data["blobsMounted"],
            blobs_skipped=data["blobsSkipped"], bytes_copied=data["bytesCopied"],
            signatures=data["signatures"], provenance=data["provenance"], lost=tuple(data["lost"]),
            data=data)

    @classmethod
    def of(cls, result: ArtifactResult) -> MirroredArtifact:
        """A snapshot of ``result`` as it is now (a run goes on changing its own)."""
        return cls.from_json(_plain(artifact_json(result)))

    def as_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.data)


@dataclass(frozen=True)
class MirrorEntry:
    """One sync entry: how many tags its source listed and its filters left out; ``error``
    when it could not be planned at all (its source or target would not open)."""

    index: int
    source: str
    target: str
    tags_listed: int
    tags_filtered_out: int
    other_shards: int  # selected, but owned by other shards of a sharded run
    error: str | None
    notes: tuple[str, ...] = ()  # said of the entry, e.g. that its hf_xet ran outside the address rule

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MirrorEntry:
        return cls(index=data["index"], source=data["source"], target=data["target"],
                   tags_listed=data["tagsListed"], tags_filtered_out=data["tagsFilteredOut"],
                   other_shards=data["otherShards"], error=data["error"], notes=tuple(data.get("notes", ())))


@dataclass(frozen=True, kw_only=True)
class MirrorReport:
    """What a mirror job (or one shard of it) did, or with ``dry_run`` would do."""

    dry_run: bool
    ok: bool  # nothing failed
    exit_code: int  # the command's: 0, or 1 when anything failed
    seconds: float
    totals: dict[str, int]  # the --json totals (copied, skipped, failed, planned, bytesCopied, ...)
    entries: tuple[MirrorEntry, ...]
    artifacts: tuple[MirroredArtifact, ...]
    shard: Shard | None = None  # the shard this run did, which mirror_merge takes with the others
    job_digest: str | None = None  # of a sharded run: which job (MirrorJob.digest())
    text: str = field(repr=False, compare=False, default="")
    data: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def of(cls, summary: MirrorSummary) -> MirrorReport:
        text = summary.format_text()
        if summary.shard is not None:
            text += f"\nshard {summary.shard} of job {summary.job_digest}"
        return cls(**_fields(_plain(summary.as_dict()), text, summary.exit_code))

    def with_status(self, status: Status) -> tuple[MirroredArtifact, ...]:
        return tuple(a for a in self.artifacts if a.status == status)

    def as_dict(self) -> dict[str, Any]:
        """The command's ``--json`` (also what ``--report FILE`` writes and mirror_merge reads)."""
        return copy.deepcopy(self.data)

    def format_text(self) -> str:
        """The command's text: a line per artifact that was not a plain skip, then the totals."""
        return self.text


@dataclass(frozen=True, kw_only=True)
class MergedMirrorReport(MirrorReport):
    """Shard reports of one job merged: the job's report, plus which shards reported
    (``missing`` ones make it fail) and how many uploads two shards both made."""

    count: int  # shards the job was cut into
    reported: tuple[int, ...]
    missing: tuple[int, ...]
    notes: tuple[str, ...]  # e.g. a shard that reported twice (a retried pod): the later counts

    @classmethod
    def of_merged(cls, merged: MergedReport) -> MergedMirrorReport:
        data = _plain(merged.as_dict())
        shards = data["shards"]
        return cls(**_fields(data, merged.format_text(), merged.exit_code), count=shards["count"],
                   reported=tuple(shards["reported"]), missing=tuple(shards["missing"]),
                   notes=tuple(shards["notes"]))


def _fields(data: dict[str, Any], text: str, exit_code: int) -> dict[str, Any]:
    shard = data.get("shard")
    return {"dry_run": data["dryRun"], "ok": data["ok"], "exit_code": exit_code, "seconds": data["seconds"],
            "totals": dict(data["totals"]), "entries": tuple(MirrorEntry.from_json(e) for e in data["entries"]),
            "artifacts": tuple(MirroredArtifact.from_json(a) for a in data["artifacts"]),
            "shard": Shard(shard["index"], shard["count"]) if shard else None,
            "job_digest": data.get("jobDigest"), "text": text, "data": data}


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as the command prints it and a reader of the JSON gets it (tuples as lists), and
    a copy that no later change of the run's own objects reaches."""
    value: dict[str, Any] = json.loads(json.dumps(data))
    return value
