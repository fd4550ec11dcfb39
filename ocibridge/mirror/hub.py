"""Hub sources of mirror jobs: ``source = "hf://ORG/NAME"``.

Each selected revision (a branch, a tag, a commit id) is resolved to its commit at planning and
becomes two tags of the target: ``<name>-<first 12 hex of the commit>``, pinned, and ``<name>``,
moving (a commit named by its id gets ``commit-<12 hex>`` only). A revision whose pinned tag
the target holds with the commit recorded in ``org.opencontainers.image.revision`` is skipped
without a download (its moving tag is pointed at it when it points elsewhere).

The copy downloads the commit with ``huggingface_hub.snapshot_download`` into the Hub cache
(its download engine: resumed ``.incomplete`` files, Xet where the endpoint offers it; the
cache is the staging area ``push hf:`` reads too), reads the snapshot as ``push hf:ORG/NAME@COMMIT``
reads it (:func:`ocibridge.kinds.hf.door.read_snapshot`) and copies the artifact with the job's
usual copy: the same digest as that push, blobs the target holds HEAD-skipped, the tag written
last. ``huggingface_hub`` is the ``ocibridge[hub]`` extra, imported only here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ocibridge.core import backslash
from ocibridge.errors import NotFound, OcibridgeError, error_text
from ocibridge.kinds.hf.door import REVISION_ANNOTATION, SOURCE_ANNOTATION
from ocibridge.kinds.hf.locator import HubReference
from ocibridge.mirror.filters import compile_pattern
from ocibridge.mirror.job import MirrorJob, RevisionFilter, SyncEntry
from ocibridge.mirror.planned import ArtifactPlan, EntryPlan
from ocibridge.mirror.shard import Shard, artifact_key
from ocibridge.mirror.summary import ArtifactResult
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.base import Store

EXTRA = "hf:// sources need huggingface_hub: pip install 'ocibridge[hub]'"
#: What ``org.opencontainers.image.source`` says, whichever endpoint served the commit (as
#: ``push hf:`` says it): the repository on the Hub; the commit pins the content.
HUB_PAGE = "https://huggingface.co/{repo_id}"
_COMMIT = re.compile(r"[0-9a-f]{40}\Z")
_TAG_BAD = re.compile(r"[^A-Za-z0-9_.-]")
_SHORT = 12
#: room for "-" and the 12 hex of the commit in a 128-character tag
_NAME_MAX = 128 - 1 - _SHORT


def hub() -> ModuleType:
    """huggingface_hub, or one error line naming the extra that brings it."""
    try:
        import huggingface_hub
    except ImportError:
        raise OcibridgeError(EXTRA) from None
    return huggingface_hub


@dataclass(frozen=True)
class HubSource:
    """An ``hf://`` entry's repository, where and how it is read."""

    repo_id: str
    endpoint: str
    token: str | None
    revision: str | None  # hf://ORG/NAME@REVISION: that revision only
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"hf://{self.repo_id}"

    @property
    def page(self) -> str:
        return HUB_PAGE.format(repo_id=self.repo_id)

    def keeps(self, path: str) -> bool:
        """Whether ``include``/``exclude`` keep a file: huggingface_hub's own rule, the one
        ``snapshot_download(allow_patterns=, ignore_patterns=)`` downloads by."""
        if not self.include and not self.exclude:
            return True
        from huggingface_hub.utils import filter_repo_objects  # type: ignore[attr-defined]

        return bool(list(filter_repo_objects([path], allow_patterns=list(self.include) or None,
                                             ignore_patterns=list(self.exclude) or None)))


def hub_source(job: MirrorJob, entry: SyncEntry, ref: HubReference) -> HubSource:
    return HubSource(ref.repo_id, job.hub_endpoint(entry), job.hub_token(entry), ref.revision,
                     tuple(entry.include), tuple(entry.exclude))


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
        refs = api.list_repo_refs(src.repo_id, token=src.token)
    except RepositoryNotFoundError:
        raise OcibridgeError(f"{src.name}: no such repository on {src.endpoint} "
                             "(or it is private and no token was given)") from None
    except HfHubHTTPError as e:
        if e.response is not None and e.response.status_code in (404, 405, 501):
            return None
        raise OcibridgeError(f"{src.name}: {src.endpoint} could not list its revisions: {_said(e)}") from None
    except Exception as e:  # the endpoint unreachable, a TLS failure: the entry fails, saying so
        raise OcibridgeError(f"{src.name}: cannot reach {src.endpoint}: {_said(e)}") from None
    found = {b.name: b.target_commit for b in refs.branches}
    for t in refs.tags:
        found[f"refs/tags/{t.name}" if t.name in found else t.name] = t.target_commit
    return found


def _said(e: BaseException) -> str:
    return " ".join(str(e).split())[:400]


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
    planner = _HubPlanner(plan, src, api, listed or {}, dry_run)
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
    def __init__(self, plan: EntryPlan, src: HubSource, api: Any, listed: dict[str, str], dry_run: bool):
        assert plan.target is not None
        self.plan, self.src, self.api, self.listed, self.dry_run = plan, src, api, listed, dry_run
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
                result.status, result.reason = "failed", f"{self.src.endpoint}: {_said(e)}"
            else:
                result.status, result.reason = "failed", f"unexpected {type(e).__name__}: {e}"
        return result

    def _plan(self, name: str, result: ArtifactResult) -> ArtifactPlan | ArtifactResult:
        commit = self.listed.get(name) or (name if _COMMIT.match(name) else None)
        info = None
        if commit is None or self.dry_run:
            info = self.api.model_info(self.src.repo_id, revision=commit or name, files_metadata=self.dry_run,
                                       token=self.src.token)
            commit = str(info.sha)
        if not _COMMIT.match(commit):
            raise OcibridgeError(f"{self.src.endpoint} names {commit!r} as the commit of {name!r}: no commit id")
        pinned, moving = tag_names(name, commit)
        result.source = f"{self.src.name}@{name} ({commit})"
        result.target = f"{self.dst.name}:{pinned}"
        also = [moving] if moving else []
        there = self._mirrored(pinned, commit)
        if there is not None:
            result.digest = there.digest
            if moving is None or self._points_at(moving, there):
                result.status, result.reason = "skipped", f"already mirrored ({pinned})"
                return result
            result.note = f"already mirrored; tag {moving} moves to it"
            return ArtifactPlan(result, self.dst.store, there.digest, moving, referrers=False)
        if also:
            result.note = f"and the moving tag {moving}"
        if info is not None and self.dry_run:  # what the download brings (files the target holds are not sent)
            sizes = [s.size or 0 for s in info.siblings or () if s.rfilename != ".gitattributes"
                     and self.src.keeps(s.rfilename)]
            result.blobs_planned, result.bytes_planned = len(sizes), sum(sizes)
            result.note = (result.note + "; " if result.note else "") + \
                f"{len(sizes)} file(s) to download from {self.src.endpoint}, then only what the target lacks is sent"
        return ArtifactPlan(result, self.dst.store, commit, pinned, referrers=False,
                            prepare=_Download(self.src, commit, self.plan.settings.concurrency.blobs),
                            also_tags=also)

    def _mirrored(self, tag: str, commit: str) -> Descriptor | None:
        """The manifest the target's ``tag`` names, if it records this repository and commit."""
        store = self.dst.store
        try:
            desc = store.resolve(tag)
        except NotFound:
            return None
        node = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
        said = (node.annotations or {}) if isinstance(node, Manifest) else {}
        if said.get(REVISION_ANNOTATION) == commit and said.get(SOURCE_ANNOTATION) == self.src.page:
            return desc
        return None

    def _points_at(self, tag: str, desc: Descriptor) -> bool:
        try:
            return self.dst.store.resolve(tag).digest == desc.digest
        except NotFound:
            return False


class _Download:
    """Run when the copy starts: the commit's files listed (bounded, every path checked), each
    downloaded into the Hub cache with huggingface_hub's engine (``hf_hub_download``: resumed
    ``.incomplete`` files, Xet where the endpoint offers it), each checked against what the
    listing said it is (an LFS file's sha256, another file's git blob id), then read as ``push
    hf:ORG/NAME@COMMIT`` reads the snapshot; (the artifact as a store, the reference to copy).

    The endpoint is not trusted: a listing of more than :data:`MAX_FILES` files, a path that is
    absolute, climbs out (``..``) or holds a control character, and bytes that do not hash to
    what the listing said fail the revision with one line before anything is published (a
    mismatching download is removed from the cache, so the next run fetches it again). A token
    never follows a redirect to another host: huggingface_hub drops it (``hf_hub_download``)."""

    def __init__(self, src: HubSource, commit: str, workers: int, cache: Path | None = None):
        self.src, self.commit, self.workers = src, commit, workers
        self.cache = cache or _cache()  # the Hub cache downloaded into (serve --upstream: its own)

    def __call__(self) -> tuple[Store, str]:
        from ocibridge.kinds.hf.door import read_snapshot
        from ocibridge.kinds.hf.locator import HubReference as Reference
        from ocibridge.kinds.source import ReadRequest
        from ocibridge.model.builder import ARTIFACT_TAG, PlannedArtifact

        src = self.src
        try:
            listed = self._listing()
            with ThreadPoolExecutor(max_workers=max(1, self.workers), thread_name_prefix="mirror-hub") as pool:
                list(pool.map(self._fetch, listed))
        except OcibridgeError:
            raise
        except Exception as e:
            raise OcibridgeError(f"{src.name}@{self.commit}: download from {src.endpoint} failed "
                                 f"(run the job again to resume it): {_said(e)}") from None
        names = {f.path for f in listed}
        package = read_snapshot(Reference(src.repo_id, self.commit), ReadRequest(),
                                keep=lambda rel: rel in names, root=self.cache)
        return PlannedArtifact(package), ARTIFACT_TAG

    def _listing(self) -> list[Any]:
        """The commit's files the entry keeps, as the endpoint lists them; at most MAX_FILES."""
        from huggingface_hub.hf_api import RepoFile

        src = self.src
        api = hub().HfApi(endpoint=src.endpoint, token=src.token)
        kept: list[Any] = []
        for seen, entry in enumerate(api.list_repo_tree(src.repo_id, revision=self.commit, recursive=True,
                                                        token=src.token), 1):
            if seen > MAX_LISTED:
                raise OcibridgeError(f"{src.name}@{self.commit}: {src.endpoint} lists more than {MAX_LISTED} "
                                     "entries: refused (no model needs that many files)")
            if not isinstance(entry, RepoFile):
                continue
            why = bad_path(entry.path)
            if why is not None:
                raise OcibridgeError(f"{src.name}@{self.commit}: {src.endpoint} lists the file {entry.path!r}, "
                                     f"which {why}: refused")
            if entry.path != ".gitattributes" and src.keeps(entry.path):
                kept.append(entry)
        if len(kept) > MAX_FILES:
            raise OcibridgeError(f"{src.name}@{self.commit}: {len(kept)} files to download, more than {MAX_FILES}")
        return kept

    def _fetch(self, entry: Any) -> None:
        """One file into the cache, then its bytes checked against the listing."""
        src = self.src
        path = Path(hub().hf_hub_download(src.repo_id, entry.path, revision=self.commit, endpoint=src.endpoint,
                                          token=src.token, cache_dir=str(self.cache), tqdm_class=_quiet_tqdm()))
        lfs = entry.lfs  # a RepoFile (the listing keeps no other): BlobLfsInfo or None
        if lfs is not None and lfs.sha256:
            said, what = str(lfs.sha256), "sha256"
            found = _sha256(path)
        elif entry.blob_id:
            said, what = str(entry.blob_id), "git blob id"
            found = git_blob_sha1(path)
        else:
            raise OcibridgeError(f"{src.name}@{self.commit}: {src.endpoint} lists {entry.path!r} with no "
                                 "sha256 and no blob id: nothing to check it against")
        if found != said:
            _forget(path)
            raise OcibridgeError(f"{src.name}@{self.commit}: {entry.path}: {src.endpoint} said {what} {said}, "
                                 f"the bytes it sent hash to {found}: refused (removed from the cache)")


#: the download of one commit as the artifact ``push hf:ORG/NAME@COMMIT`` makes: a mirror job's, and
#: serve's ``--upstream`` (hubserver/upstream/ingest.py)
CommitDownload = _Download


def git_blob_sha1(path: Path) -> str:
    """What git names a file: the Hub lists a file that is not in LFS by it (``blob_id``)."""
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())  # noqa: S324 - git's name, not security
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


#: what one revision may list (the Hub itself keeps repositories under 100,000 files)
MAX_LISTED = 200_000
MAX_FILES = 100_000
MAX_PATH = 4096


def bad_path(rel: str) -> str | None:
    """Why a path the endpoint lists cannot be a file of the model; None when it can."""
    if not rel or len(rel) > MAX_PATH:
        return "is empty or too long"
    if rel.startswith("/"):
        return "is absolute"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in rel):
        return "holds a control character"
    if any(part in ("", ".", "..") for part in rel.split("/")):
        return "has an empty, '.' or '..' component"
    # a backslash is a character of the name (core/backslash.py), as the Hub and the artifact keep it
    if "\\" in rel and backslash.backslash_separates():
        return "holds a backslash, a folder separator on this system"
    if windows_escape(rel):
        return "climbs out of its folder as Windows reads it (huggingface_hub will not download it)"
    return None


def windows_escape(rel: str) -> bool:
    """Whether ``rel`` read with a backslash as a separator has a ``..`` or starts anew at a root or
    drive: what huggingface_hub refuses to download anywhere (``_validate_relative_filename``)."""
    from pathlib import PureWindowsPath

    if ".." in rel.replace("\\", "/").split("/"):
        return True
    return any(PureWindowsPath(part).drive or PureWindowsPath(part).root for part in rel.split("/"))


def _cache() -> Path:
    from ocibridge.kinds.hf.hubcache import hub_cache

    return hub_cache()


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _forget(path: Path) -> None:
    """A download that is not what was listed: its blob and the snapshot's link to it go."""
    import contextlib
    import os

    real = os.path.realpath(path)
    for doomed in (real, str(path)):
        with contextlib.suppress(OSError):
            os.unlink(doomed)


def _quiet_tqdm() -> Callable[..., Any]:
    """snapshot_download's overall bar, silenced: the job reports per revision."""
    from tqdm.auto import tqdm

    class Quiet(tqdm):  # type: ignore[type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    return Quiet
