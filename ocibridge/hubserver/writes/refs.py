"""Branches, tags and history of the write API (huggingface_hub's create_branch, create_tag,
list_repo_commits): a branch or tag is a registry tag, which of the two it is the repository's
refs record says (:mod:`.refsrecord`); a commit's history is the chain of its manifests' parents
(:mod:`.history`).

    POST /api/models/REPO/branch/{name}     create_branch (from ``startingPoint``; ``emptyBranch``: a
                                            branch of one empty commit; ``overwrite``: an existing
                                            branch moved rather than a 409)
    POST /api/models/REPO/tag/{revision}    create_tag (named ``tag``)
    GET  /api/models/REPO/commits/{rev}     list_repo_commits (``expand[]=formatted``: formatted=True)
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.access import Grant
from ocibridge.hubserver.answers import NOT_JSON, branch_of, error, in_thread, json_body, requested_repo
from ocibridge.hubserver.repo.catalog import Resolved
from ocibridge.hubserver.repo.clashes import place
from ocibridge.hubserver.repo.commits import BadCommit, CommitRequest
from ocibridge.hubserver.repo.refnames import HEADS, TAGS
from ocibridge.hubserver.repo.refrules import hub_ref_name
from ocibridge.hubserver.repo.refsrecord import RECORD_LOCK, read_record, write_record
from ocibridge.hubserver.repo.sources import COMMIT, RevisionNotFound
from ocibridge.hubserver.writes.committing import Committer
from ocibridge.hubserver.writes.repos import Repos
from ocibridge.hubserver.writes.reserved import reserved_why
from ocibridge.stores.base import WritableStore

#: the summary of an empty branch's commit
EMPTY_SUMMARY = "Empty branch"


class RefRoutes:
    """The branch, tag and history routes, over what the write routes share."""

    def __init__(self, repos: Repos, commits: Committer):
        self.repos = repos
        self.commits = commits  # an empty branch's commit

    async def list_commits(self, request: Request) -> Response:
        from ocibridge.hubserver.repo.history import commits as history

        catalog = self.repos.catalog
        head = await in_thread(catalog.resolve, requested_repo(request), request.path_params["revision"])
        asked = request.query_params.getlist("expand[]") + request.query_params.getlist("expand")
        return JSONResponse(await in_thread(history, head, "formatted" in asked))

    async def create_ref(self, request: Request) -> Response:
        """``create_branch`` (``/branch/{name}``, from ``startingPoint``) and ``create_tag``
        (``/tag/{revision}``, named ``tag``): the registry's tag of that name on the manifest."""
        repo_id = requested_repo(request)
        grant = self.repos.writer(request, repo_id)
        body = await json_body(request) if await request.body() else {}
        if body is NOT_JSON or not isinstance(body, dict):
            return error(400, None, "expected a JSON object")
        name: object
        start: object
        if request.path_params["kind"] == "branch":
            name, start = branch_of(request.path_params["ref"]), body.get("startingPoint") or "main"
        else:
            name, start = body.get("tag"), request.path_params["ref"]
        if not isinstance(name, str) or not isinstance(start, str):
            return error(400, None, "expected a name and a revision")
        await in_thread(self.repos.catalog.resolve, repo_id, start)  # the Hub's order: RevisionNotFound first
        if COMMIT.fullmatch(name.lower()):  # a ref the commit ids of the read API would hide
            return error(400, "BadRequest", f"Invalid reference name: {name}: it reads as a commit id")
        if reserved_why(name):  # create_tag's name, in the body (a path's: writes/reserved.py)
            return error(400, "BadRequest", f"Invalid reference name: {name}: {reserved_why(name)}")
        try:
            hub_ref_name(name)
        except OcibridgeError as e:
            return error(400, "BadRequest", f"Invalid reference name: {e}")
        kind = HEADS if request.path_params["kind"] == "branch" else TAGS
        branching = kind == HEADS
        empty = branching and body.get("emptyBranch") is True
        overwrite = branching and body.get("overwrite") is True
        if overwrite and await in_thread(self._exists, repo_id, name, kind):
            # the Hub's: an existing branch moved to the start asked (or emptied); neither asked, left as it is
            if empty or body.get("startingPoint"):
                await in_thread(self._move_branch, repo_id, name, start, grant, empty)
            return JSONResponse({})
        if not await in_thread(self._create_ref, repo_id, name, start, kind):
            return error(409, None, f"Reference refs/{kind}/{name} already exists")
        if empty:  # the Hub's empty branch: one commit of no file, with no parent
            await in_thread(self._empty, repo_id, name, grant)
        return JSONResponse({})

    def _empty(self, repo_id: str, name: str, grant: Grant) -> None:
        """Make the branch ``name`` one commit of no file, with no parent (the commit route's
        own path: :meth:`.Committer.empty_commit`)."""
        self.commits.empty_commit(repo_id, name, grant, CommitRequest(summary=EMPTY_SUMMARY), {})
        self.repos.catalog.forget(repo_id)

    def _move_branch(self, repo_id: str, name: str, start: str, grant: Grant, empty: bool) -> None:
        """``overwrite``: the existing branch ``name`` made empty, or moved to ``start``'s
        commit (its registry tag retagged, under the branch's lock as a commit is)."""
        if empty:
            self._empty(repo_id, name, grant)
            return
        catalog = self.repos.catalog
        with self.repos.branches.lock(repo_id, name):
            where = catalog.resolve(repo_id, name, kind=HEADS)
            _tag(catalog.resolve(repo_id, start), where.tag or catalog.default_tag)
            catalog.forget(repo_id)

    def _create_ref(self, repo_id: str, name: str, start: str, kind: str) -> bool:
        """Tag ``start`` as the ref ``name`` of ``kind`` unless that ref exists (False), the name
        locked as a commit to it is: two creates of one name at once are one 200 and one 409,
        never the second moving the first's ref, and a commit to it waits until it is made. The
        refs record says what ``name`` is and where (:mod:`ocibridge.hubserver.repo.refnames`) before its tag is
        written (:mod:`.refsrecord`), under the repository's record lock (two refs made at once
        both recorded)."""
        catalog = self.repos.catalog
        with self.repos.branches.lock(repo_id, name):
            if self._exists(repo_id, name, kind):
                return False
            source = catalog.resolve(repo_id, start)
            tag = catalog.default_tag
            if name != "main":
                with self.repos.branches.lock(repo_id, RECORD_LOCK):
                    record = read_record(source.repo)
                    tag, placed = place(source, record, kind, name, catalog.default_tag)
                    if placed != record:
                        write_record(source.repo, _writable(source), placed)
            _tag(source, tag)
            catalog.forget(repo_id)
            return True

    def _exists(self, repo_id: str, name: str, kind: str) -> bool:
        """Whether the ref ``name`` of ``kind`` exists; ``main`` and main's registry tag are
        taken by main whatever the kind asked."""
        catalog = self.repos.catalog
        try:
            if name in ("main", catalog.default_tag):
                catalog.resolve(repo_id, name, ref=True)
            else:
                catalog.resolve(repo_id, name, kind=kind)
        except RevisionNotFound:
            return False
        return True


def _writable(source: Resolved) -> WritableStore:
    store = source.repo.store
    if not isinstance(store, WritableStore):
        raise BadCommit(f"{source.repo.shown}: not a store serve can tag")
    return store


def _tag(source: Resolved, tag: str) -> None:
    from ocibridge.transfer.writer import retag

    retag(_writable(source), source.top, [source.repo.reference(tag)])  # the one writer: a tag is a manifest write
