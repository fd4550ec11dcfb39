"""Branches, tags and history of the write API (huggingface_hub's create_branch, create_tag,
list_repo_commits): a branch or tag is a registry tag, which of the two it is the repository's
refs record says (:mod:`.refsrecord`); a commit's history is the chain of its manifests' parents
(:mod:`.history`). What a create writes is :mod:`ocibridge.hubserver.repo.refedits`'s.

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
from ocibridge.hubserver.answers import NOT_JSON, branch_of, error, in_thread, json_body, requested_repo
from ocibridge.hubserver.repo.committing import Committer
from ocibridge.hubserver.repo.refedits import create_ref, empty_branch, move_branch, ref_exists
from ocibridge.hubserver.repo.refnames import HEADS, TAGS
from ocibridge.hubserver.repo.refrules import hub_ref_name
from ocibridge.hubserver.repo.sources import COMMIT
from ocibridge.hubserver.writeaccess import Writers
from ocibridge.hubserver.writeroutes.reserved import reserved_why


class RefRoutes:
    """The branch, tag and history routes: the request read and answered; refs are made by
    :mod:`ocibridge.hubserver.repo.refedits` (an empty branch's commit: ``committer``)."""

    def __init__(self, writers: Writers, committer: Committer):
        self.writers = writers
        self.committer = committer
        self.repos = committer.repos

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
        grant = self.writers.writer(request, repo_id)
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
        if reserved_why(name):  # create_tag's name, in the body (a path's: writeroutes/reserved.py)
            return error(400, "BadRequest", f"Invalid reference name: {name}: {reserved_why(name)}")
        try:
            hub_ref_name(name)
        except OcibridgeError as e:
            return error(400, "BadRequest", f"Invalid reference name: {e}")
        kind = HEADS if request.path_params["kind"] == "branch" else TAGS
        branching = kind == HEADS
        empty = branching and body.get("emptyBranch") is True
        overwrite = branching and body.get("overwrite") is True
        author = self.writers.author(grant)
        if overwrite and await in_thread(ref_exists, self.repos, repo_id, name, kind):
            # the Hub's: an existing branch moved to the start asked (or emptied); neither asked, left as it is
            if empty or body.get("startingPoint"):
                await in_thread(move_branch, self.committer, repo_id, name, start, author, empty)
            return JSONResponse({})
        if not await in_thread(create_ref, self.repos, repo_id, name, start, kind):
            return error(409, None, f"Reference refs/{kind}/{name} already exists")
        if empty:  # the Hub's empty branch: one commit of no file, with no parent
            await in_thread(empty_branch, self.committer, repo_id, name, author)
        return JSONResponse({})
