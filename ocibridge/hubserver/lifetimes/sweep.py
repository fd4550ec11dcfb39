"""Which commits a proxy fetched go, and why the others stay (docs/lifetimes.md).

A *proxied revision* is a manifest a repository's ``ocibridge-upstream-<id>`` tag names. It goes
when all of these hold, and stays otherwise, with the reason said:

- it was not read for the lifetime (its reads record, :mod:`.readsrecord`; one with no read
  recorded yet starts its clock at the sweep that first sees it): a branch's head that someone
  read is read itself, so a branch read within the lifetime keeps its head;
- it is not *pinned*: no tag names it but the proxy's own (its upstream tag, its commit tag, and the
  names the reads record says the proxy tagged on it: ``latest`` for main, a branch's name). Any
  other tag is a person's: a Hub tag or branch made here (``create_tag``, ``create_branch``),
  ``ocibridge tag``, ``skopeo copy`` to a tag of the repository;
- it is not *promoted*: no other repository of the served prefix holds the same manifest (a copy
  by ``ocibridge copy``, ``skopeo``, a mirror job), asked of each with one HEAD by digest.

It goes by its tags: each is moved to serve's tombstone (repo/tombstone.py: the registry then holds
no tag naming it, as ``delete_branch`` leaves a branch), and the registry's garbage collection
(``garbage-collect --delete-untagged``) frees the blobs no other tagged manifest uses. Its referrers
(chunk table, scan report, signatures) keep theirs: they are small, and the same commit fetched
again is the same digest they name. The next request for it finds its tags deleted and fetches it
again (its upstream tag still says the repository came from the upstream)."""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ocibridge.errors import InvalidReference, NotFound, OcibridgeError
from ocibridge.hubserver.lifetimes.durations import shown
from ocibridge.hubserver.lifetimes.readsrecord import ReadsRecord, read_reads, write_reads
from ocibridge.hubserver.repo.sources import Repository, Source, repo_parts
from ocibridge.hubserver.repo.tombstone import is_tombstone
from ocibridge.oci.bookkeeping import (
    READS_TAG,
    REFS_TAG,
    UPSTREAM_TAG_PREFIX,
    WRITER_TAG,
    commit_id,
    commit_of_tag,
    commit_tag,
    is_evidence,
    referrer_of_tag,
)
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes

log = logging.getLogger("ocibridge.hubserver")
Audit = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Decision:
    """One proxied revision, and what the sweep made of it."""

    repo_id: str
    commit: str  # the upstream's commit id
    digest: str
    drop: bool
    why: str
    last_read: int | None = None  # unix seconds (None: no read recorded before this sweep)
    tags: tuple[str, ...] = ()  # the tags it loses (a drop)
    freed: int = 0  # bytes its blobs hold that no revision kept in its repository uses (a drop)

    def line(self, dry_run: bool) -> str:
        if self.drop:
            verb = "would drop" if dry_run else "dropped"
            return (f"{verb} {self.repo_id}@{self.commit} ({self.digest}): {self.freed} bytes, {self.why}; "
                    f"tags {', '.join(self.tags)}")
        return f"kept {self.repo_id}@{self.commit}: {self.why}"


@dataclass
class SweepReport:
    """What one sweep decided (and, unless a dry run, did)."""

    dry_run: bool
    keep: float
    decisions: list[Decision] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # repositories not read (left as they are), why

    @property
    def dropped(self) -> list[Decision]:
        return [d for d in self.decisions if d.drop]

    @property
    def freed(self) -> int:
        return sum(d.freed for d in self.dropped)

    def lines(self) -> list[str]:
        said = [d.line(self.dry_run) for d in self.decisions if d.drop]
        said += [d.line(self.dry_run) for d in self.decisions if not d.drop]
        said += [f"skipped {s}" for s in self.skipped]
        verb = "would go" if self.dry_run else "dropped"
        said.append(f"{len(self.dropped)} of {len(self.decisions)} proxied revisions {verb} "
                    f"(unread for {shown(self.keep)}), {self.freed} bytes")
        return said


class Sweep:
    """One pass over a proxy's first source."""

    def __init__(self, source: Source, keep: float, now: float, *, dry_run: bool = False,
                 audit: Audit | None = None, forget: Callable[[str], None] | None = None,
                 writing: contextlib.AbstractContextManager[Any] | None = None):
        self.source, self.keep, self.now, self.dry_run = source, keep, int(now), dry_run
        self.audit = audit or (lambda entry: None)
        self.forget = forget or (lambda repo_id: None)
        self.writing = writing or contextlib.nullcontext()
        self.report = SweepReport(dry_run, keep)
        self._ids: list[str] = []

    def run(self) -> SweepReport:
        self._ids = self.source.repo_ids()
        for repo_id in self._ids:
            repo = self.source.repository(repo_parts(repo_id) or [])
            if repo is None:
                continue
            try:
                self.report.decisions += self._repository(repo_id, repo)
            except (OcibridgeError, OSError) as e:  # left as it is: the next sweep tries again
                log.warning("upstream-keep: %s: not swept: %s", repo_id, e)
                self.report.skipped.append(f"{repo_id}: {e}")
        return self.report

    def _repository(self, repo_id: str, repo: Repository) -> list[Decision]:
        tags = repo.tags()
        upstream = [t for t in tags if t.startswith(UPSTREAM_TAG_PREFIX)]
        if not upstream:
            return []
        with self.writing:
            record = read_reads(repo)
            revisions = _named_by(repo, upstream)  # tag -> descriptor, tombstones left out
            names: dict[str, list[str]] = {}
            for tag, desc in _named_by(repo, [t for t in tags if _is_name(t)]).items():
                names.setdefault(desc.digest, []).append(tag)
            decisions = [self._decide(repo_id, tag[len(UPSTREAM_TAG_PREFIX):], desc, record,
                                      names.get(desc.digest, []), tags)
                         for tag, desc in sorted(revisions.items())]
            decisions = _with_bytes(repo, decisions, revisions, names)
            if not self.dry_run:
                self._apply(repo_id, repo, record, decisions)
        return decisions

    def _decide(self, repo_id: str, commit: str, desc: Descriptor, record: ReadsRecord, names: list[str],
                tags: list[str]) -> Decision:
        last = record.read.get(commit)
        if last is None:
            return Decision(repo_id, commit, desc.digest, False,
                            "no read recorded yet: its lifetime counts from this sweep")
        age = self.now - last
        if age < self.keep:
            return Decision(repo_id, commit, desc.digest, False, f"read {_ago(age)} ago", last)
        persons = sorted(n for n in names if record.named.get(n) != commit)
        if persons:
            return Decision(repo_id, commit, desc.digest, False,
                            f"pinned: tag {persons[0]} names it, which the proxy did not tag", last)
        copy = self._copied(repo_id, desc)
        if copy is not None:
            return Decision(repo_id, commit, desc.digest, False, f"promoted: {copy} holds a copy", last)
        own = [t for t in (commit_tag(commit_id(desc.digest)),) if t in tags]
        return Decision(repo_id, commit, desc.digest, True, f"unread for {_ago(age)}", last,
                        tuple([UPSTREAM_TAG_PREFIX + commit, *own, *sorted(names)]))

    def _copied(self, repo_id: str, desc: Descriptor) -> str | None:
        """Another repository of the source that holds ``desc`` (one that cannot be asked counts)."""
        for other in self._ids:
            repo = self.source.repository(repo_parts(other) or []) if other != repo_id else None
            if repo is None:
                continue
            try:
                repo.store.resolve(desc.digest)
                return other
            except (NotFound, InvalidReference):
                continue
            except (OcibridgeError, OSError):
                return f"{other} (not asked: the registry failed)"
        return None

    def _apply(self, repo_id: str, repo: Repository, record: ReadsRecord, decisions: list[Decision]) -> None:
        """The drops done, then the record written: dropped commits out of it, first sightings in."""
        from ocibridge.hubserver.repo.deletes import bury
        from ocibridge.hubserver.repo.refsrecord import record_store

        read, named = dict(record.read), dict(record.named)
        for decision in decisions:
            if not decision.drop:
                read.setdefault(decision.commit, self.now)
                continue
            bury(record_store(repo), repo, [t for t in decision.tags if _still(repo, t, decision.digest)])
            read.pop(decision.commit, None)
            named = {tag: commit for tag, commit in named.items() if commit != decision.commit}
            self.audit(_audit_line(decision))
            log.info("upstream-keep: %s", decision.line(False))
        if read != record.read or named != record.named:
            write_reads(repo, ReadsRecord(read, named))
        if any(d.drop for d in decisions):
            self.forget(repo_id)


def _is_name(tag: str) -> bool:
    """A tag that may name a revision for someone: neither a proxied commit's own, nor a referrer's,
    a record's or a signature's."""
    return not (tag.startswith(UPSTREAM_TAG_PREFIX) or commit_of_tag(tag) is not None
                or referrer_of_tag(tag) is not None or tag in (REFS_TAG, READS_TAG, WRITER_TAG)
                or is_evidence(tag))


def _named_by(repo: Repository, tags: Iterable[str]) -> dict[str, Descriptor]:
    found: dict[str, Descriptor] = {}
    for tag in tags:
        with contextlib.suppress(NotFound, InvalidReference):
            desc = repo.store.resolve(repo.reference(tag))
            if not is_tombstone(desc.digest):
                found[tag] = desc
    return found


def _still(repo: Repository, tag: str, digest: str) -> bool:
    """Whether ``tag`` still names ``digest`` (a branch's tag moved since is left where it went)."""
    try:
        return repo.store.resolve(repo.reference(tag)).digest == digest
    except (NotFound, InvalidReference):
        return False


def _blobs(repo: Repository, desc: Descriptor) -> dict[str, int]:
    """The blobs (digest -> size) a manifest names, itself included."""
    held = {desc.digest: desc.size}
    parsed = parse_manifest_bytes(repo.store.fetch_bytes(desc), desc.mediaType)
    if isinstance(parsed, Manifest):
        for blob in [parsed.config, *parsed.layers]:
            held[blob.digest] = blob.size
    return held


def _with_bytes(repo: Repository, decisions: list[Decision], revisions: dict[str, Descriptor],
                names: dict[str, list[str]]) -> list[Decision]:
    """Each drop with the bytes only dropped revisions of the repository use (a blob a kept revision,
    or a manifest a person's tag names, shares is not freed)."""
    if not any(d.drop for d in decisions):
        return decisions
    dropped = {d.digest for d in decisions if d.drop}
    kept_digests = {desc.digest for desc in revisions.values() if desc.digest not in dropped}
    kept_digests |= {digest for digest in names if digest not in dropped}
    descs = {desc.digest: desc for desc in revisions.values()}
    kept: set[str] = set()
    for digest in kept_digests:
        desc = descs.get(digest) or repo.store.resolve(digest)
        kept |= set(_blobs(repo, desc))
    counted: set[str] = set()
    out = []
    for d in decisions:
        if d.drop:
            own = {k: v for k, v in _blobs(repo, descs[d.digest]).items() if k not in kept and k not in counted}
            counted |= set(own)
            d = Decision(d.repo_id, d.commit, d.digest, True, d.why, d.last_read, d.tags, sum(own.values()))
        out.append(d)
    return out


def _ago(seconds: float) -> str:
    """``seconds`` rounded down to its largest unit (``3d``, ``5h``, ``12m``, ``40s``)."""
    whole = max(1, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def _audit_line(decision: Decision) -> dict[str, Any]:
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
    last = None if decision.last_read is None else datetime.datetime.fromtimestamp(
        decision.last_read, datetime.timezone.utc).isoformat(timespec="seconds")
    return {"time": now, "action": "upstream_drop", "outcome": "landed", "status": 200, "token": None,
            "repository": decision.repo_id, "revision": decision.commit, "commit": decision.commit,
            "digest": decision.digest, "tags": list(decision.tags), "bytes": decision.freed, "last_read": last,
            "reason": decision.why}
