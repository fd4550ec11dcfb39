"""The commit route of the write API (huggingface_hub's create_commit, _commit_api.py): the
files a commit names (uploaded over LFS or Xet into :class:`.Staging`, inline in its body, kept
from the branch's head, or mounted from another repository) become a new manifest on the branch.

    POST /api/models/REPO/commit/{rev}       the commit (:mod:`.commits`): a new manifest

The commit is built with push's own code (``publish``, handed down by :mod:`ocibridge.api.serve`):
its files are linked into a directory (:func:`.commits.linked_tree`) and their digests, verified
already, told to push's digest cache, so it hashes none of them again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.access import Grant
from ocibridge.hubserver.answers import branch_of, error, in_thread, requested_repo
from ocibridge.hubserver.reading.catalog import Resolved
from ocibridge.hubserver.reading.files import FileLists
from ocibridge.hubserver.reading.sources import COMMIT, CREATED, RepoNotFound, commit_of, repo_parts
from ocibridge.hubserver.uploads.staging import write_all
from ocibridge.hubserver.writes import commits
from ocibridge.hubserver.writes.repos import Repos
from ocibridge.oci.reference import check_tag

log = logging.getLogger("ocibridge.hubserver")


class CommitRoutes:
    """The commit route, over what the write routes share; ``publish``: push's code (None:
    this serve refuses commits)."""

    def __init__(self, repos: Repos, publish: commits.Publish | None):
        self.repos = repos
        self.staging = repos.staging
        self.publish = publish

    async def commit(self, request: Request) -> Response:
        repo_id = requested_repo(request)
        allowed = self.repos.writer(request, repo_id)
        if self.publish is None:
            return error(403, None, "this serve does not publish (its application was built without push)")
        if request.query_params.get("create_pr") in ("1", "true"):
            return error(400, None, "serve makes no pull requests: commit to a branch")
        branch = branch_of(request.path_params["revision"])
        if COMMIT.fullmatch(branch.lower()):
            return error(400, "BadRequest", f"Invalid rev id: {branch}: a commit id names no branch to commit to")
        payload = commits.read_payload(await request.body())  # a BadCommit: 400 (failures.py)
        try:
            check_tag(self.repos.catalog.default_tag if branch == "main" else branch)
        except OcibridgeError as e:
            raise commits.BadCommit(f"{branch}: not a branch serve can write: {e}") from None
        for content in payload.inline.values():  # StagingFull: 507
            await in_thread(self._stage_bytes, repo_id, content)
        # StaleParent: 412, MissingEntry: 404, BadCommit: 400, UnknownContent: 422 (failures.py)
        oid = await in_thread(self._commit, repo_id, branch, payload, allowed)
        url = f"{self.repos.base(request)}/{repo_id}/commit/{oid}"
        return JSONResponse({"success": True, "commitOid": oid, "commitUrl": url, "pullRequestUrl": None})

    def _stage_bytes(self, repo_id: str, content: bytes) -> None:
        sha = hashlib.sha256(content).hexdigest()
        if self.staging.pin(sha, repo_id):
            return
        with self.staging.reserve(len(content), repo_id), self.staging.new_file() as (tmp, fd):
            write_all(fd, content)
            self.staging.commit_file(tmp, sha)
        self.staging.pin(sha, repo_id)

    def _commit(self, repo_id: str, branch: str, payload: commits.CommitRequest, grant: Grant) -> str:
        """Build and push the commit, the branch locked; its commit oid."""
        assert self.publish is not None
        with self.repos.branches.lock(repo_id, branch):
            head = self.repos.head(repo_id, branch)
            if payload.parent is not None and (head is None or head.commit != payload.parent[:40].lower()):
                raise commits.StaleParent(f"A commit has happened since: {branch} is at "
                                          f"{head.commit if head else 'no commit'}, not {payload.parent}. "
                                          "Please refresh and try again.")
            parent: dict[str, str] = {}
            held: Callable[[str], Path] = _nothing
            if head is not None:
                files = self.repos.lists.of(head)
                parent = {path: f.sha256 for path, f in files.files.items()}
                held = _Held(self.repos.lists, head, files.files).path
            tree = commits.new_tree(parent, payload, self._staged_or_mounted(repo_id, payload), held)
            parts = repo_parts(repo_id)
            repo = head.repo if head is not None else self.repos.catalog.sources[0].repository(parts or [])
            if repo is None:
                raise RepoNotFound(f"{repo_id}: no source can hold it")
            tag = self.repos.catalog.default_tag if branch == "main" else branch
            dest = repo.located(tag, "")
            if dest is None:
                raise commits.BadCommit(f"{repo.shown}: not a place serve can push to")
            annotations = {commits.SUMMARY: payload.summary or "Upload files", commits.AUTHOR: grant.name,
                           CREATED: _now()}
            if payload.description:
                annotations[commits.DESCRIPTION] = payload.description
            if head is not None:
                annotations[commits.PARENT] = head.top.digest  # the digest: the walk needs no tag
            with commits.linked_tree(tree, self.staging.root / "commits", (parts or [repo_id])[-1]) as directory:
                _known_digests(directory, tree)
                digest = self.publish(directory, dest, annotations)
            self.repos.created.discard(repo_id)
            # the commit has landed: what it took from staging goes, unless another flow may name it
            named = [a.sha256 for a in payload.added] + [hashlib.sha256(c).hexdigest() for c in payload.inline.values()]
            self.staging.release(named, repo_id)
            log.info("%s: %s committed %s as %s", repo_id, grant.name, branch, digest)
            return commit_of(digest)


    def _staged_or_mounted(self, repo_id: str, payload: commits.CommitRequest) -> Callable[[str], Path | None]:
        """The upload of a SHA-256 staged for ``repo_id``, else the blob another repository holds
        (:mod:`.uploads.mounts`), read into staging so push builds its layer, and mounts it rather than
        sends it. A file staged for another repository only is neither: its writer never
        committed it, so naming its SHA-256 gives nobody else its bytes (:meth:`.Staging.pinned`)."""
        sizes = {added.sha256: added.size for added in payload.added}

        def staged(sha256: str) -> Path | None:
            found = self.staging.path_for(sha256) if self.staging.pinned(sha256, repo_id) else None
            if found is None and self.repos.mounts.fetch(repo_id, sha256, sizes.get(sha256), self.staging):
                found = self.staging.path_for(sha256)
            return found

        return staged


def _now() -> str:
    import datetime

    moment = datetime.datetime.now(datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class _Held:
    """The local bytes of a branch's files: the snapshot of its manifest, made when first needed."""

    def __init__(self, lists: FileLists, head: Resolved, files: dict[str, Any]):
        self.lists, self.head, self.files = lists, head, files
        self._root: Path | None = None

    def path(self, rel: str) -> Path:
        local = self.files[rel].local
        if local is not None:
            return Path(local)
        if self._root is None:
            snap = self.lists.cache.snapshot(self.head.repo.store, self.head.model.digest,
                                             shown=self.head.model.digest, concurrency=self.lists.concurrency)
            self._root = snap.path
        return self._root / rel


def _known_digests(directory: Path, tree: dict[str, commits.Source]) -> None:
    """Tell push the digest of each file of the commit (verified already: an upload by staging,
    a branch's file by the model cache), so it reads none of them to hash it again: push's
    digest cache, keyed by the link's own path and identity (taken once every link is made)."""
    from ocibridge.model import digestcache

    for rel, source in tree.items():
        digestcache.remember(directory / rel, f"sha256:{source.sha256}")


def _nothing(rel: str) -> Path:
    raise commits.UnknownContent(f"{rel}: not in the branch")
