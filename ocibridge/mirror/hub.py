"""Hub sources of mirror jobs: ``source = "hf://ORG/NAME"`` (a dataset: ``"hf://datasets/ORG/NAME"``,
listed, resolved and downloaded through the Hub's dataset API, built as ``push hf:datasets/…`` builds it).

Each selected revision (a branch, a tag, a commit id) is resolved to its commit at planning and
becomes two tags of the target: ``<name>-<first 12 hex of the commit>``, pinned, and ``<name>``,
moving (a commit named by its id gets ``commit-<12 hex>`` only). A revision whose pinned tag
the target holds with the commit recorded in ``org.opencontainers.image.revision`` is skipped
without a download (its moving tag is pointed at it when it points elsewhere), unless the target
lacks the referrer of the chunk table its manifest binds (an older run tagged it without): then it
is copied again and completed (:func:`table_lacking`).

The copy downloads the commit with ``huggingface_hub.snapshot_download`` into the Hub cache
(its download engine: resumed ``.incomplete`` files, Xet where the endpoint offers it; the
cache is the staging area ``push hf:`` reads too), reads the snapshot as ``push hf:ORG/NAME@COMMIT``
reads it (:func:`ocibridge.kinds.hf.kind.read_snapshot`) and copies the artifact with the job's
usual copy: the same digest as that push, blobs the target holds HEAD-skipped, the tag written
last. ``huggingface_hub`` is the ``ocibridge[hub]`` extra, imported only here.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ocibridge.chunks.choice import ChunkChoice
from ocibridge.errors import NotFound, OcibridgeError, error_text
from ocibridge.kinds.hf.commitdownload import CommitDownload, HubSource, hub, said
from ocibridge.kinds.hf.kind import REVISION_ANNOTATION, SOURCE_ANNOTATION
from ocibridge.kinds.hf.locator import HubReference
from ocibridge.mirror.filters import compile_pattern
from ocibridge.mirror.job import MirrorJob, SyncEntry
from ocibridge.mirror.jobsections import RevisionFilter
from ocibridge.mirror.planned import ArtifactPlan, EntryPlan
from ocibridge.mirror.shard import Shard, artifact_key
from ocibridge.mirror.summary import ArtifactResult
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.base import Store, referrers_read

_COMMIT = re.compile(r"[0-9a-f]{40}\Z")
_TAG_BAD = re.compile(r"[^A-Za-z0-9_.-]")
_SHORT = 12
#: room for "-" and the 12 hex of the commit in a 128-character tag
_NAME_MAX = 128 - 1 - _SHORT


def hub_source(job: MirrorJob, entry: SyncEntry, ref: HubReference) -> HubSource:
    return HubSource(ref.repo_id, job.hub_endpoint(entry), job.hub_token(entry), ref.revision,
                     tuple(entry.include), tuple(entry.exclude), repo_type=ref.repo_type)


def tag_names(name: str, commit: str) -> tuple[str, str | None]:
    """(pinned tag, moving tag or None) of revision ``name`` at ``commit``: ``main`` ->
    (``main-<12 hex>``, ``main``); a commit id -> (``commit-<12 hex>``, None). Characters a tag
    cannot hold become ``-`` (``refs/pr/1`` -> ``refs-pr-1``), a leading ``.`` or ``-`` becomes
    ``_``, and the name is cut to 115 characters."""
    short = commit[:_SHORT]
    if _COMMIT.match(name):
        return f"commit-{short}", None
    moving = _TAG_BAD.sub("-", name)[:_NAME_MAX]
    if moving[:1] in (".", "-"):
        moving = "_" + moving[1:]
    return f"{moving}-{short}", moving


def select_revisions(listed: dict[str, str] | None, spec: RevisionFilter) -> list[str]:
    """The revision names ``spec`` keeps, sorted: of ``listed`` (branch and tag names), plus
    commit ids ``allow`` names; when the endpoint lists no refs (None), the names ``allow``
    spells out (a glob or a regular expression then is an error)."""
    allow = [compile_pattern(p) for p in spec.allow]
    deny = [compile_pattern(p) for p in spec.deny]
    literal = [p for p in spec.allow if not p.startswith("re:") and not any(c in p for c in "*?[")]
    if listed is None:
        patterns = [p for p in spec.allow if p not in literal]
        if patterns:
            raise OcibridgeError(f"the endpoint lists no branches and tags, so revisions.allow = {patterns} "
                                 "matches nothing: name the revisions (main, v1.0, a commit id)")
        names = set(literal)
    else:
        names = {n for n in listed if any(m(n) for m in allow)}
        names |= {p for p in literal if _COMMIT.match(p)}
    return sorted(n for n in names if not any(m(n) for m in deny))


def list_refs(api: Any, src: HubSource) -> dict[str, str] | None:
    """Branches and tags of the repository, name -> commit; None when the endpoint answers no
    ``/refs``. A tag named like a branch (the Hub keeps them apart) is listed as the revision
    ``refs/tags/NAME``, mirrored as the tags ``refs-tags-NAME[-<12 hex>]``: the branch keeps NAME,
    and neither overwrites the other."""
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    try:
        refs = api.list_repo_refs(src.repo_id, repo_type=src.repo_type, token=src.token)
    except RepositoryNotFoundError:
        raise OcibridgeError(f"{src.name}: no such repository on {src.endpoint} "
                             "(or it is private and no token was given)") from None
    except HfHubHTTPError as e:
        if e.response is not None and e.response.status_code in (404, 405, 501):
            return None
        raise OcibridgeError(f"{src.name}: {src.endpoint} could not list its revisions: {said(e)}") from None
    except Exception as e:  # the endpoint unreachable, a TLS failure: the entry fails, saying so
        raise OcibridgeError(f"{src.name}: cannot reach {src.endpoint}: {said(e)}") from None
    found = {b.name: b.target_commit for b in refs.branches}
    for t in refs.tags:
        found[f"refs/tags/{t.name}" if t.name in found else t.name] = t.target_commit
    return found


def plan_hub(job: MirrorJob, plan: EntryPlan, ref: HubReference, *, dry_run: bool, shard: Shard | None) -> None:
    """Fill ``plan`` for an ``hf://`` entry: a copy per revision the target lacks (downloaded
    when it runs), a skip per revision it holds, a failure per revision that does not resolve."""
    entry, target = plan.entry, plan.target
    assert target is not None and plan.source is not None
    if target.reference is not None:
        raise OcibridgeError(f"target {entry.target!r}: a Hub source's revisions name their own tags; "
                             "give a repository (host/repo or oci:PATH)")
    src = hub_source(job, entry, ref)
    api = hub().HfApi(endpoint=src.endpoint, token=src.token)
    spec = RevisionFilter(allow=[src.revision]) if src.revision else (entry.revisions or RevisionFilter())
    listed = list_refs(api, src)
    chosen = select_revisions(listed, spec)
    plan.summary.tags_listed = len(listed) if listed is not None else len(chosen)
    plan.summary.tags_filtered_out = plan.summary.tags_listed - len(chosen) if listed is not None else 0
    if shard is not None:
        mine = [n for n in chosen if shard.owns(artifact_key(src.name, n, target.name, None))]
        plan.summary.other_shards = len(chosen) - len(mine)
        chosen = mine
    plan.chunks = job.chunks(entry)
    planner = _HubPlanner(plan, src, api, listed or {}, dry_run, plan.chunks)
    with ThreadPoolExecutor(max_workers=plan.settings.concurrency.artifacts,
                            thread_name_prefix="mirror-plan") as pool:
        outcomes = list(pool.map(planner.plan_one, chosen))
    moving: dict[str, str] = {}
    for name, outcome in zip(chosen, outcomes, strict=True):
        if isinstance(outcome, ArtifactPlan):
            clash = next((n for n in outcome.also_tags if n in moving), None)
            if clash is not None:
                outcome.result.status = "failed"
                outcome.result.reason = f"revisions {moving[clash]!r} and {name!r} both make the tag {clash!r}"
                plan.results.append(outcome.result)
                continue
            moving.update((t, name) for t in outcome.also_tags)
            plan.copies.append(outcome)
        else:
            plan.results.append(outcome)


class _HubPlanner:
    def __init__(self, plan: EntryPlan, src: HubSource, api: Any, listed: dict[str, str], dry_run: bool,
                 chunks: ChunkChoice):
        assert plan.target is not None
        self.plan, self.src, self.api, self.listed, self.dry_run = plan, src, api, listed, dry_run
        self.chunks = chunks  # the entry's chunk keys: the table each revision's artifact binds
        self.dst = plan.target

    def plan_one(self, name: str) -> ArtifactPlan | ArtifactResult:
        result = ArtifactResult(self.plan.index, f"{self.src.name}@{name}", self.dst.name, "planned")
        try:
            return self._plan(name, result)
        except OcibridgeError as e:
            result.status, result.reason = "failed", error_text(e)
        except Exception as e:  # one bad revision (or a bug it triggers) must not sink the job
            from huggingface_hub.errors import HfHubHTTPError, RevisionNotFoundError

            if isinstance(e, RevisionNotFoundError):
                result.status, result.reason = "failed", f"no revision {name!r} on {self.src.endpoint}"
            elif isinstance(e, HfHubHTTPError):
                result.status, result.reason = "failed", f"{self.src.endpoint}: {said(e)}"
            else:
                result.status, result.reason = "failed", f"unexpected {type(e).__name__}: {e}"
        return result

    def _plan(self, name: str, result: ArtifactResult) -> ArtifactPlan | ArtifactResult:
        commit = self.listed.get(name) or (name if _COMMIT.match(name) else None)
        info = None
        if commit is None or self.dry_run:
            info = self.api.repo_info(self.src.repo_id, revision=commit or name, files_metadata=self.dry_run,
                                      repo_type=self.src.repo_type, token=self.src.token)
            commit = str(info.sha)
        if not _COMMIT.match(commit):
            raise OcibridgeError(f"{self.src.endpoint} names {commit!r} as the commit of {name!r}: no commit id")
        pinned, moving = tag_names(name, commit)
        result.source = f"{self.src.name}@{name} ({commit})"
        result.target = f"{self.dst.name}:{pinned}"
        also = [moving] if moving else []
        there = self._mirrored(pinned, commit)
        if there is not None and not table_lacking(self.dst.store, *there):
            result.digest = there[0].digest
            if moving is None or self._points_at(moving, there[0]):
                result.status, result.reason = "skipped", f"already mirrored ({pinned})"
                return result
            result.note = f"already mirrored; tag {moving} moves to it"
            return ArtifactPlan(result, self.dst.store, there[0].digest, moving, referrers=False)
        if there is not None:  # tagged by an older run without the table's referrer: built again, attached
            result.note = ("completed: already mirrored, but without 1 referrer(s) (the chunk table its "
                           "manifest binds) the source holds, which this run adds")
        elif also:
            result.note = f"and the moving tag {moving}"
        if info is not None and self.dry_run:  # what the download brings (files the target holds are not sent)
            sizes = [s.size or 0 for s in info.siblings or () if s.rfilename != ".gitattributes"
                     and self.src.keeps(s.rfilename)]
            result.blobs_planned, result.bytes_planned = len(sizes), sum(sizes)
            result.note = (result.note + "; " if result.note else "") + \
                f"{len(sizes)} file(s) to download from {self.src.endpoint}, then only what the target lacks is sent"
        return ArtifactPlan(result, self.dst.store, commit, pinned, referrers=False,
                            prepare=CommitDownload(self.src, commit, self.plan.settings.concurrency.blobs,
                                                   chunks=self.chunks),
                            also_tags=also)

    def _mirrored(self, tag: str, commit: str) -> tuple[Descriptor, Manifest] | None:
        """The manifest the target's ``tag`` names, if it records this repository and commit."""
        store = self.dst.store
        try:
            desc = store.resolve(tag)
        except NotFound:
            return None
        node = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
        if not isinstance(node, Manifest):
            return None
        said = node.annotations or {}
        if said.get(REVISION_ANNOTATION) == commit and said.get(SOURCE_ANNOTATION) == self.src.page:
            return desc, node
        return None

    def _points_at(self, tag: str, desc: Descriptor) -> bool:
        try:
            return self.dst.store.resolve(tag).digest == desc.digest
        except NotFound:
            return False


def table_lacking(store: Store, desc: Descriptor, manifest: Manifest) -> bool:
    """Whether ``store`` lacks the referrer that keeps the chunk table the revision's manifest
    (at ``desc``) binds: the table is the source's (the build of the commit binds it, and the
    manifest's digest covers the binding), so this is known without a download. One HEAD of the
    referrer the copy attaches (chunks/attach.py); where it is not there, the chunk-table
    referrers ``store`` lists are read for one that keeps the same table (attached otherwise)."""
    from ocibridge.chunks.attach import table_referrer
    from ocibridge.chunks.chain import bound_table_descriptor
    from ocibridge.chunks.chunktable import ARTIFACT_TYPE, ChunkTableError

    try:
        table = bound_table_descriptor(manifest)
    except ChunkTableError:  # a binding no build writes: nothing the copy would attach
        return False
    if table is None:
        return False
    subject = Descriptor(mediaType=desc.mediaType, digest=desc.digest, size=desc.size)
    if store.exists(table_referrer(subject, table)[0]):
        return False
    held = referrers_read(store, subject, ARTIFACT_TYPE)
    for ref in held:
        node = parse_manifest_bytes(held.manifest(ref), ref.mediaType)
        if isinstance(node, Manifest) and any(layer.digest == table.digest for layer in node.layers):
            return False
    return True
