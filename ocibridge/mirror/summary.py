"""What a mirror job did (or, in a dry run, would do): per artifact and in total."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ocibridge.core.asdict import camel_key
from ocibridge.core.terminal import one_line
from ocibridge.mirror.shard import Shard

#: a dry run's words for blobs two artifacts of the run share: the run sends each once, by
#: whichever artifact's copy gets to it first (they run side by side), not by a known one
SHARED_WORDS = "shared with another artifact of this run (sent once, by whichever copies it first)"

Status = Literal["copied", "skipped", "failed", "planned"]


@dataclass
class ArtifactResult:
    """One artifact of one sync entry. ``planned``: a dry run would copy it."""

    entry: int
    source: str
    target: str
    status: Status
    digest: str | None = None
    reason: str = ""
    # from the plan: what the target lacks and what it already holds
    blobs_planned: int = 0
    bytes_planned: int = 0
    blobs_present: int = 0
    bytes_present: int = 0
    blobs_to_mount: int = 0  # not on the target, but in another repository of the same registry
    bytes_to_mount: int = 0
    blob_actions: list[tuple[str, int, str]] = field(default_factory=list)  # (digest, size, send|mount|skip)
    # from the copy
    blobs_copied: int = 0
    blobs_mounted: int = 0
    blobs_skipped: int = 0
    bytes_copied: int = 0
    manifests_copied: int = 0
    referrers: int = 0
    signatures: int = 0  # signature manifests carried: cosign .sig/.att/.sbom tags and bundle referrers
    blobs_sent: list[str] = field(default_factory=list)  # digests this run uploaded (not mounted, not skipped)
    provenance: str | None = None  # the provenance referrer attached (provenance = true)
    scan: dict[str, Any] | None = None  # the scan's verdict and report referrer (scan = refuse|quarantine)
    # re-labelled artifacts: referrers of the original, not copied (they name the old digest)
    referrers_left_behind: int = 0
    note: str = ""  # said about a copied or planned artifact, e.g. what was left behind
    lost: list[str] = field(default_factory=list)  # converted to another family: fields dropped, layers rewritten


@dataclass
class EntrySummary:
    index: int
    source: str
    target: str
    tags_listed: int = 0
    tags_filtered_out: int = 0
    other_shards: int = 0  # selected, but owned by another shard of a --shard run
    error: str | None = None
    notes: list[str] = field(default_factory=list)  # said of the entry once a run, e.g. how hf_xet ran


@dataclass
class MirrorSummary:
    dry_run: bool = False
    entries: list[EntrySummary] = field(default_factory=list)
    artifacts: list[ArtifactResult] = field(default_factory=list)
    seconds: float = 0.0
    shard: Shard | None = None  # a --shard run did this part of the job
    job_digest: str | None = None  # MirrorJob.digest() of a sharded run, to merge only one job's reports
    finished_at: str = ""  # UTC, ISO 8601: of two reports of one shard (a retried pod), the later counts

    def with_status(self, status: Status) -> list[ArtifactResult]:
        return [a for a in self.artifacts if a.status == status]

    @property
    def failed(self) -> list[ArtifactResult]:
        return self.with_status("failed")

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def totals(self) -> dict[str, int]:
        keys = ("blobs_planned", "bytes_planned", "blobs_present", "bytes_present", "blobs_to_mount",
                "bytes_to_mount", "blobs_copied",
                "blobs_mounted", "blobs_skipped", "bytes_copied", "manifests_copied", "referrers",
                "signatures", "referrers_left_behind")
        out = {k: sum(getattr(a, k) for a in self.artifacts) for k in keys}
        for status in ("copied", "skipped", "failed", "planned"):
            out[status] = len(self.with_status(status))
        return out

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` form; a shard's also says which shard of which job it is."""
        out: dict[str, Any] = {
            "dryRun": self.dry_run,
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "totals": _camel(self.totals()),
            "entries": [_camel(asdict(e)) for e in self.entries],
            "artifacts": [artifact_json(a) for a in self.artifacts],
        }
        if self.shard is not None:
            out["shard"] = {"index": self.shard.index, "count": self.shard.count}
            out["jobDigest"] = self.job_digest
            out["finishedAt"] = self.finished_at
        return out

    def format_text(self) -> str:
        """Human summary: one line per artifact that was not a plain skip, then the totals."""
        lines = []
        for a in self.artifacts:
            if a.status == "copied":
                signed = f", {a.signatures} signature(s)" if a.signatures else ""
                lines.append(f"copied  {a.source} -> {a.target} ({_size(a.bytes_copied)} sent, "
                             f"{a.blobs_mounted} mounted, {a.blobs_skipped} already there{signed})")
            elif a.status == "planned":
                mount = f"{a.blobs_to_mount} to mount, " if a.blobs_to_mount else ""
                # a blob another artifact of the run counted first is a skip row here too; the run
                # copies artifacts side by side, and which of them sends it is the first to get there
                others = sum(action == "skip" for _, _, action in a.blob_actions) - a.blobs_present
                shared = f", {others} {SHARED_WORDS}" if others else ""
                lines.append(f"would copy {a.source} -> {a.target} ({a.blobs_planned} blobs to send, "
                             f"{_size(a.bytes_planned)}; {mount}{a.blobs_present} already there{shared})")
                for digest, size, action in a.blob_actions:
                    lines.append(f"        {action:<5} {digest} ({_size(size)})")
            elif a.status == "failed":
                lines.append(f"FAILED  {a.source} -> {a.target}: {a.reason}")
            else:
                lines.append(f"skipped {a.source}: {a.reason}")
            if a.note and a.status != "failed":
                lines.append(f"        note: {a.note}")
            if a.scan is not None and a.status == "copied":
                said = "quarantined: " + a.scan["finding"] if a.scan["quarantined"] else a.scan["verdict"]
                lines.append(f"        scan: {said} (report {a.scan['report']})")
            if a.status in ("copied", "planned"):  # a skip wrote nothing: its losses were said when it was
                lines.extend(f"        lost: {one_line(x)}" for x in a.lost)
        used = {a.entry for a in self.artifacts}
        for e in self.entries:
            lines.extend(f"note: {e.source}: {n}" for n in e.notes)
            if e.index not in used and e.error is None and not e.other_shards:
                lines.append(f"nothing to do for {e.source}: no tag selected "
                             f"({e.tags_listed} listed, {e.tags_filtered_out} filtered out)")
        t = self.totals()
        left = t["referrers_left_behind"]
        tail = f"; {left} referrer(s) of re-labelled or converted artifacts left behind" if left else ""
        if self.dry_run:
            mounts = f", {t['blobs_to_mount']} blobs to mount" if t["blobs_to_mount"] else ""
            lines.append(f"dry run: {t['planned']} to copy ({_size(t['bytes_planned'])} to send in "
                         f"{t['blobs_planned']} blobs{mounts}), {t['skipped']} skipped, {t['failed']} failed{tail}")
        else:
            signed = f", {t['signatures']} signature(s) carried" if t["signatures"] else ""
            lines.append(f"{t['copied']} copied ({_size(t['bytes_copied'])} sent, {t['blobs_mounted']} "
                         f"blobs mounted{signed}), {t['skipped']} skipped, {t['failed']} failed "
                         f"in {self.seconds:.1f} s{tail}")
        return "\n".join(one_line(line) for line in lines)  # a source name holding a newline


def artifact_json(result: ArtifactResult) -> dict[str, Any]:
    """One artifact as the ``--json`` report lists it."""
    return _camel(asdict(result))


def _camel(d: dict[str, Any]) -> dict[str, Any]:
    """``bytes_copied`` → ``bytesCopied``, as in every other ``--json`` output."""
    return {camel_key(key): value for key, value in d.items()}


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
