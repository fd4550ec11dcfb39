"""``ocibridge mirror report REPORTS…``: the shard reports of one job merged into one summary.

Each ``--shard I/N --json`` report says which shard of which job (by digest) it is, so a
missing shard, a report of another job or of a dry run mixed with real runs is detected
rather than summed. Reports are read as untrusted input: from a file holding only the JSON,
or from a pod's log where the JSON stands among other lines.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from ocibridge.core.fsutil import check_output_file
from ocibridge.core.smallfile import read_small
from ocibridge.core.terminal import one_line
from ocibridge.errors import OcibridgeError, UsageError
from ocibridge.mirror.endpoints import job_reference
from ocibridge.mirror.summary import ArtifactResult, EntrySummary, MirrorSummary
from ocibridge.oci.reference import LayoutReference, RegistryReference

#: A report larger than this is not one ocibridge wrote (a million artifacts is ~1 GiB).
MAX_REPORT_BYTES = 1 << 30

_ARTIFACT = TypeAdapter(ArtifactResult)
_ENTRY = TypeAdapter(EntrySummary)


@dataclass
class ShardReport:
    path: str
    index: int
    count: int
    job_digest: str
    dry_run: bool
    ok: bool
    finished_at: str
    seconds: float
    entries: list[EntrySummary]
    artifacts: list[ArtifactResult]


@dataclass
class MergedReport:
    """The job's summary, plus which shards reported and which uploads were repeated."""

    summary: MirrorSummary
    count: int
    job_digest: str
    reported: list[int]
    missing: list[int]
    notes: list[str] = field(default_factory=list)
    repeated: dict[str, int] = field(default_factory=dict)  # digest → uploads beyond the first
    repeated_bytes: int = 0

    @property
    def exit_code(self) -> int:
        return 1 if self.missing or not self.summary.ok else 0

    def as_dict(self) -> dict[str, Any]:
        out = self.summary.as_dict()
        out["ok"] = self.exit_code == 0
        out["jobDigest"] = self.job_digest
        out["shards"] = {"count": self.count, "reported": self.reported, "missing": self.missing,
                         "notes": self.notes}
        out["repeatedUploads"] = {"blobs": len(self.repeated), "extraUploads": sum(self.repeated.values()),
                                  "bytes": self.repeated_bytes}
        return out

    def format_text(self) -> str:
        lines = [f"note: {n}" for n in self.notes]
        if self.repeated:
            extra = sum(self.repeated.values())
            lines.append(f"{len(self.repeated)} blob(s) uploaded more than once ({extra} extra upload(s), "
                         f"{self.repeated_bytes} bytes): shards that found a blob missing at the same "
                         "moment both send it; harmless")
        if self.missing:
            shown = ", ".join(str(i) for i in self.missing[:20]) + (" …" if len(self.missing) > 20 else "")
            lines.append(f"MISSING {len(self.missing)} of {self.count} shard(s): {shown} "
                         "(their artifacts are not in this summary; run them again)")
        else:
            lines.append(f"all {self.count} shard(s) reported")
        tail = "\n".join(one_line(line) for line in lines)  # a report's path holding a newline
        return f"{self.summary.format_text()}\n{tail}"


def merge_shard_reports(reports: list[ShardReport]) -> MergedReport:
    """Check that the reports are shards of one run of one job, then merge them."""
    if not reports:
        raise UsageError("mirror report: give the shard reports to merge (REPORT…)")
    first = reports[0]
    for r in reports[1:]:
        if r.count != first.count:
            raise OcibridgeError(f"{r.path}: shard {r.index}/{r.count}, but {first.path} is one of "
                                 f"{first.count} shards: reports of differently sharded runs")
        if r.job_digest != first.job_digest:
            raise OcibridgeError(f"{r.path}: a report of another job than {first.path} "
                                 f"({r.job_digest} ≠ {first.job_digest})")
        if r.dry_run != first.dry_run:
            raise OcibridgeError(f"{r.path}: dry-run and real reports cannot be merged ({first.path} differs)")
    notes: list[str] = []
    latest: dict[int, ShardReport] = {}
    for r in reports:
        other = latest.get(r.index)
        if other is not None:
            notes.append(f"shard {r.index}: reports {other.path} and {r.path}; the later one counts")
            if other.finished_at > r.finished_at:
                continue
        latest[r.index] = r
    chosen = [latest[i] for i in sorted(latest)]
    merged = MergedReport(_merge(chosen), first.count, first.job_digest, sorted(latest),
                          [i for i in range(first.count) if i not in latest], notes)
    _repeated(chosen, merged)
    return merged


def _merge(reports: list[ShardReport]) -> MirrorSummary:
    summary = MirrorSummary(dry_run=reports[0].dry_run, seconds=max(r.seconds for r in reports))
    seen: set[tuple[int, str, str]] = set()
    selected: dict[int, int] = {}  # entry → tags selected over all shards
    entries: dict[int, EntrySummary] = {}
    for r in reports:
        mine = Counter(a.entry for a in r.artifacts)
        for e in r.entries:
            selected[e.index] = max(selected.get(e.index, 0), mine[e.index] + e.other_shards)
            known = entries.setdefault(e.index, e)
            if known.error is None and e.error is not None:
                known.error = e.error
            known.notes.extend(n for n in e.notes if n not in known.notes)  # each shard says its own
        for a in r.artifacts:
            key = (a.entry, a.source, a.target)  # an entry that failed to open fails in every shard
            if key not in seen:
                seen.add(key)
                summary.artifacts.append(a)
    done = Counter(a.entry for a in summary.artifacts)
    for index in sorted(entries):
        e = entries[index]
        e.other_shards = max(0, selected.get(index, 0) - done[index])  # in shards that did not report
        summary.entries.append(e)
    summary.artifacts.sort(key=lambda a: (a.entry, a.source, a.target))
    return summary


def _repeated(reports: list[ShardReport], merged: MergedReport) -> None:
    """Blobs uploaded more than once into one registry (or layout), over all shards."""
    sizes: dict[str, int] = {}
    sends: Counter[tuple[str, str]] = Counter()
    for r in reports:
        for a in r.artifacts:
            sizes.update((d, s) for d, s, _ in a.blob_actions)
            place = _place(a.target)
            sends.update((place, d) for d in a.blobs_sent)
    for (_, digest), n in sends.items():
        if n > 1:
            merged.repeated[digest] = merged.repeated.get(digest, 0) + n - 1
            merged.repeated_bytes += (n - 1) * sizes.get(digest, 0)


def _place(target: str) -> str:
    """Where blobs are shared: a registry host (every repository of it) or one layout."""
    try:
        ref = job_reference(target)
    except OcibridgeError:  # a report names what its run opened; an odd one is its own place
        return target
    if isinstance(ref, LayoutReference):
        return f"oci:{ref.path}"
    if isinstance(ref, RegistryReference):
        return ref.registry
    return target


def read_report(path: str) -> ShardReport:
    """One shard report from a file of only JSON or from a log that contains it."""
    try:  # a file the user names (a FIFO of a log is fine), bounded
        raw = read_small(path, MAX_REPORT_BYTES, "cannot read report", named=True)
    except FileNotFoundError as e:
        raise OcibridgeError(f"cannot read report {path}: {e.strerror}") from None
    data = _find_report(raw.decode("utf-8", "replace"))
    if data is None:
        raise OcibridgeError(f"{path}: no mirror report in it (expected the output of "
                             "`ocibridge mirror JOB --shard I/N --json`)")
    return parse_report(path, data)


def _find_report(text: str) -> dict[str, Any] | None:
    """The last mirror summary (a JSON object with ``totals``) that starts at the beginning of
    a line, a shard's in preference."""
    decoder = json.JSONDecoder()
    found: dict[str, Any] | None = None
    start = 0
    while True:
        at = text.find("{", start)
        if at < 0:
            return found
        start = at + 1
        if at and text[at - 1] != "\n":
            continue
        try:
            value, end = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and "totals" in value and (found is None or "shard" in value
                                                               or "shard" not in found):
            found = value
            start = end


def parse_report(path: str, data: dict[str, Any]) -> ShardReport:
    """A shard's ``--json`` report, checked; ``path`` names it in errors and notes."""
    shard = data.get("shard")
    if not isinstance(shard, dict):
        raise OcibridgeError(f"{path}: the report of an unsharded run (merge the reports of "
                             "`--shard I/N` runs)")
    try:
        index, count = shard["index"], shard["count"]
        if not (type(index) is int and type(count) is int and 0 <= index < count):
            raise ValueError(f"shard {index!r}/{count!r} is not I/N with 0 <= I < N")
        entries = [_ENTRY.validate_python(_snake(e)) for e in _list(data, "entries")]
        artifacts = [_ARTIFACT.validate_python(_snake(a)) for a in _list(data, "artifacts")]
        digest, dry_run, ok = data["jobDigest"], data["dryRun"], data["ok"]
        if not (isinstance(digest, str) and isinstance(dry_run, bool) and isinstance(ok, bool)):
            raise ValueError("jobDigest, dryRun or ok has the wrong type")
        seconds = float(data.get("seconds", 0.0))
        finished = data.get("finishedAt", "")
        if not isinstance(finished, str):
            raise ValueError("finishedAt is not a string")
    except KeyError as e:
        raise OcibridgeError(f"{path}: the report lacks {e.args[0]!r}") from None
    except PydanticValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise OcibridgeError(f"{path}: {where}: {first['msg']}") from None
    except (TypeError, ValueError) as e:
        raise OcibridgeError(f"{path}: {e}") from None
    return ShardReport(path, index, count, digest, dry_run, ok, finished, seconds, entries, artifacts)


def _list(data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = data[key]
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ValueError(f"{key} is not a list of objects")
    return value


def _snake(d: dict[str, Any]) -> dict[str, Any]:
    """``bytesCopied`` → ``bytes_copied``: the ``--json`` names back to the fields."""
    out = {}
    for key, value in d.items():
        if isinstance(key, str):
            out["".join("_" + c.lower() if c.isupper() else c for c in key)] = value
    return out


def write_report(path: str | Path, data: dict[str, Any]) -> None:
    """Write a report whole or not at all: a pod killed while writing leaves the old one."""
    path = Path(path)
    check_output_file(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OcibridgeError(f"cannot write report {path}: {e.strerror}") from None
