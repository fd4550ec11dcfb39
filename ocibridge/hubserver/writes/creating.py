"""Making a repository and setting who sees it: ``create_repo`` and ``update_repo_settings``
(huggingface_hub's hf_api.py).

    POST /api/repos/create                  {name, organization, visibility|private, files, license}
    PUT  /api/models/REPO/settings          {visibility|private, gated: "auto"|"manual"|false}

A bare name (no organization, no ``/``: what ``push_to_hub("name")`` sends) lands in the token's
namespace (:attr:`.access.Grant.namespace`, the name ``whoami`` answers), as the Hub does. A new
repository gets the Hub's first commit at once (:mod:`.initial`), with the files the create sent
and the model card of its license. A private one is recorded in
its refs record before that commit is written, so it is never readable by others for a moment.
One made again over a deleted one of its name is recorded so (``recreated``): the deleted one's
commits, still in the registry until its garbage collection, are never reached through it by
digest or commit id (:mod:`ocibridge.hubserver.repo.reborn`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.hubserver.access import Denied, Grant
from ocibridge.hubserver.answers import NOT_JSON, error, in_thread, json_body, requested_repo
from ocibridge.hubserver.audit import note
from ocibridge.hubserver.repo import initial
from ocibridge.hubserver.repo.commits import BadCommit
from ocibridge.hubserver.repo.refsrecord import GATES, RECORD_LOCK, RefsRecord, read_record, record_store, write_record
from ocibridge.hubserver.repo.sources import repo_parts
from ocibridge.hubserver.writes.committing import Committer
from ocibridge.hubserver.writes.repos import Repos

log = logging.getLogger("ocibridge.hubserver")


def visibility_of(body: dict[str, object]) -> bool | None:
    """Private (True), public (False) or not said (None), from ``visibility`` (huggingface_hub
    from 1.0) or ``private`` (before it)."""
    seen = body.get("visibility")
    if seen in ("private", "public"):
        return seen == "private"
    if seen is not None:
        raise BadCommit(f"Invalid visibility {seen!r}: expected 'public' or 'private' (a model repository)")
    private = body.get("private")
    return private if isinstance(private, bool) else None


def gate_of(body: dict[str, object]) -> str | None:
    """The gate ``update_repo_settings`` asks for: "auto", "manual", "" (not gated: ``false``)
    or None (not said); another value is refused."""
    gated = body.get("gated")
    if gated is None:
        return None
    if gated in (False, "false"):
        return ""
    if gated in GATES:
        return str(gated)
    raise BadCommit(f"Invalid gated {gated!r}: expected 'auto', 'manual' or false")


async def model_repo_body(request: Request) -> dict[str, Any] | Response:
    """The JSON body of a repository route (create, delete, move), or the 400 that answers it:
    no JSON object, or a repository type other than a model (datasets and spaces are not OCI models)."""
    body = await json_body(request)
    if body is NOT_JSON or not isinstance(body, dict):
        return error(400, None, "expected a JSON body")
    kind = body.get("type") or "model"
    if kind != "model":
        return error(400, None, f"serve publishes models only: a {kind} repository is refused "
                     "(datasets and spaces are not OCI models)")
    return body


async def named_repo(repos: Repos, request: Request) -> tuple[dict[str, Any], Grant, str] | Response:
    """The body of a create or delete, the writer's grant (any repository: the name is read from the
    body), and the repo id it names (:func:`repo_id_of`); or the 400 that answers the body."""
    body = await model_repo_body(request)
    if isinstance(body, Response):
        return body
    grant = repos.writer(request, None)
    return body, grant, repo_id_of(body.get("name"), body.get("organization"), grant)


def repo_id_of(name: object, organization: object, grant: Grant) -> str:
    """The repo id a create or delete names: ``organization/name``, ``name`` when it holds its
    namespace, else the token's namespace (the Hub's ``create_repo("name")``)."""
    if not isinstance(name, str) or not name:
        raise BadCommit("expected {'name': ..., 'organization': ...}")
    if isinstance(organization, str) and organization:
        return f"{organization}/{name}"
    return name if "/" in name else f"{grant.namespace}/{name}"


class Creating:
    """``create_repo`` and the repository's settings, over what the write routes share."""

    def __init__(self, repos: Repos, commits: Committer):
        self.repos = repos
        self.commits = commits

    async def create_repo(self, request: Request) -> Response:
        named = await named_repo(self.repos, request)
        if isinstance(named, Response):
            return named
        body, grant, repo_id = named
        if repo_parts(repo_id) is None or self.repos.catalog.sources[0].repository(repo_parts(repo_id) or []) is None:
            return error(400, None, f"Invalid repo name: {repo_id}")
        note(request, repository=repo_id)  # its audit line names it (audit.py)
        try:
            self.repos.writer(request, repo_id)
        except Denied as e:
            name = body.get("name")
            if isinstance(name, str) and "/" not in name and not body.get("organization"):
                raise Denied(e.status, f"{e} (the bare name {name!r} became {repo_id}: a bare name lands in "
                             "the token's namespace, its user name, as on the Hub)", e.code) from None
            raise
        private = visibility_of(body)
        files = initial.first_files(body)  # a malformed one: 400 before anything is made
        url = f"{self.repos.base(request)}/{repo_id}"
        made = await in_thread(self._create, repo_id, grant, bool(private), files)
        if not made:
            return JSONResponse({"error": "You already created this model repo", "url": url}, status_code=409,
                                headers={"X-Error-Message": "You already created this model repo"})
        return JSONResponse({"url": url, "name": repo_id, "id": repo_id})

    def _create(self, repo_id: str, grant: Grant, private: bool, files: dict[str, bytes]) -> bool:
        """The repository with its first commit; False when it exists. Under the lock of its
        ``main``: two creates at once are one made and one 409."""
        with self.repos.branches.lock(repo_id, "main"):
            if self.repos.exists(repo_id):
                return False
            repo = self.repos.catalog.sources[0].repository(repo_parts(repo_id) or [])
            assert repo is not None  # checked by the route
            with self.repos.branches.lock(repo_id, RECORD_LOCK):
                old = read_record(repo)
                # a deleted repository of that name made again: none of its commits is this one's (reborn.py)
                fresh = RefsRecord(private=private, recreated=old.deleted or old.recreated)
                if old != fresh:
                    write_record(repo, record_store(repo), fresh)
            self.repos.catalog.forget(repo_id)
            self.commits.first_commit(repo_id, grant, files)
            log.info("%s: created by %s%s", repo_id, grant.name, " (private)" if private else "")
            return True

    async def settings(self, request: Request) -> Response:
        """``update_repo_settings``: the visibility and the gate (who may fetch the files:
        :meth:`.access.Gate.may_fetch`)."""
        repo_id = requested_repo(request)
        self.repos.writer(request, repo_id)
        body = await json_body(request)
        if body is NOT_JSON or not isinstance(body, dict):
            return error(400, None, "expected a JSON body")
        gated = gate_of(body)
        private = visibility_of(body)
        if private is not None or gated is not None:
            await in_thread(self.set_settings, repo_id, private, gated)
        return JSONResponse({})

    def set_settings(self, repo_id: str, private: bool | None, gated: str | None) -> None:
        """Record the repository's visibility and gate, each where given (RepoNotFound for a
        repository that does not exist)."""
        head = self.repos.catalog.resolve(repo_id, "main")
        with self.repos.branches.lock(repo_id, RECORD_LOCK):
            record = read_record(head.repo)
            fresh = dataclasses.replace(record, private=record.private if private is None else private,
                                        gated=record.gated if gated is None else gated)
            if fresh != record:
                write_record(head.repo, record_store(head.repo), fresh)
        self.repos.catalog.forget(repo_id)
