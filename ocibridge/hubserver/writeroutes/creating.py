"""Making a repository and setting who sees it: ``create_repo`` and ``update_repo_settings``
(huggingface_hub's hf_api.py).

    POST /api/repos/create                  {name, organization, type, visibility|private, files, license}
    PUT  /api/models/REPO/settings          {visibility|private, gated: "auto"|"manual"|false}
    PUT  /api/datasets/REPO/settings        (a dataset's)

A bare name (no organization, no ``/``: what ``push_to_hub("name")`` sends) lands in the token's
namespace (:attr:`.access.Grant.namespace`, the name ``whoami`` answers), as the Hub does. A new
repository gets the Hub's first commit at once (:mod:`.initial`), with the files the create sent
and the model card of its license; what is written, and in which order, is
:mod:`ocibridge.hubserver.repo.creation`'s.
"""

from __future__ import annotations

import hashlib
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.hubserver.access import Denied, Grant
from ocibridge.hubserver.answers import NOT_JSON, error, in_thread, json_body, requested_repo
from ocibridge.hubserver.audit import note
from ocibridge.hubserver.repo import initial
from ocibridge.hubserver.repo.commits import BadCommit
from ocibridge.hubserver.repo.committing import Committer
from ocibridge.hubserver.repo.creation import create_repo, set_settings
from ocibridge.hubserver.repo.refsrecord import GATES
from ocibridge.hubserver.repo.reponames import hub_id, key_of, noun
from ocibridge.hubserver.writeaccess import Writers
from ocibridge.kinds.hf.repotype import MODEL, REPO_TYPES, model_id_allowed


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


async def repo_body(request: Request) -> tuple[dict[str, Any], str]:
    """The JSON body of a repository route (create, delete, move) and the repository type it
    names (``type``: a model when absent); raises :class:`BadCommit` (the 400 the failure table
    answers, as for the body's other faults) for no JSON object, or a type serve does not keep
    (spaces are applications, not OCI artifacts)."""
    body = await json_body(request)
    if body is NOT_JSON or not isinstance(body, dict):
        raise BadCommit("expected a JSON body")
    kind = body.get("type") or MODEL
    if kind not in REPO_TYPES:
        raise BadCommit(f"serve keeps models and datasets only: a {kind} repository is refused "
                        "(a space is an application, not an OCI artifact)")
    return body, str(kind)


def repo_key(repo_type: str, repo_id: str) -> str:
    """The key (:mod:`.repo.keys`) of ``repo_id`` of ``repo_type``; a model id whose first part the
    Hub reserves is refused as the Hub refuses it (400)."""
    if repo_type == MODEL and not model_id_allowed(repo_id.lower().split("/")):
        raise BadCommit(f"Invalid repo name: {repo_id!r}: 'datasets' and 'spaces' are reserved names "
                        "(a dataset is created with repo_type='dataset')")
    return key_of(repo_type, repo_id)


async def named_repo(writers: Writers, request: Request) -> tuple[dict[str, Any], Grant, str]:
    """The body of a create or delete, the writer's grant (any repository: the name is read from the
    body), and the key of the repository it names (:func:`repo_id_of`, of the body's type)."""
    body, repo_type = await repo_body(request)
    grant = writers.writer(request, None)
    return body, grant, repo_key(repo_type, repo_id_of(body.get("name"), body.get("organization"), grant))


def repo_id_of(name: object, organization: object, grant: Grant) -> str:
    """The repo id a create or delete names: ``organization/name``, ``name`` when it holds its
    namespace, else the token's namespace (the Hub's ``create_repo("name")``)."""
    if not isinstance(name, str) or not name:
        raise BadCommit("expected {'name': ..., 'organization': ...}")
    if isinstance(organization, str) and organization:
        return f"{organization}/{name}"
    return name if "/" in name else f"{grant.namespace}/{name}"


class Creating:
    """``create_repo`` and the repository's settings: the request read and answered; the
    repository made by :func:`..repo.creation.create_repo` (its first commit: ``committer``)."""

    def __init__(self, writers: Writers, committer: Committer):
        self.writers = writers
        self.committer = committer

    async def create_repo(self, request: Request) -> Response:
        body, grant, repo_id = await named_repo(self.writers, request)
        if self.committer.repos.first_repository(repo_id) is None:
            return error(400, None, f"Invalid repo name: {hub_id(repo_id)}")
        note(request, repository=repo_id)  # its audit line names it (audit.py)
        try:
            self.writers.writer(request, repo_id)
        except Denied as e:
            name = body.get("name")
            if isinstance(name, str) and "/" not in name and not body.get("organization"):
                raise Denied(e.status, f"{e} (the bare name {name!r} became {repo_id}: a bare name lands in "
                             "the token's namespace, its user name, as on the Hub)", e.code) from None
            raise
        private = visibility_of(body)
        files = initial.first_files(body)  # a malformed one: 400 before anything is made
        # serve --quotas: its namespace's repositories, and the bytes of its first commit (the record
        # of a private one is written before that commit: refused first, nothing is made)
        first = {f"sha256:{hashlib.sha256(b).hexdigest()}": len(b) for b in (initial.GITATTRIBUTES, *files.values())}
        await in_thread(self.committer.quotas.new_repo, repo_id, first)
        url = f"{self.writers.base(request)}/{repo_id}"  # a key is the repository's web path
        made = await in_thread(create_repo, self.committer, repo_id, self.writers.author(grant), bool(private), files)
        if not made:
            exists = f"You already created this {noun(repo_id)} repo"
            return JSONResponse({"error": exists, "url": url}, status_code=409, headers={"X-Error-Message": exists})
        return JSONResponse({"url": url, "name": hub_id(repo_id), "id": hub_id(repo_id)})

    async def settings(self, request: Request) -> Response:
        """``update_repo_settings``: the visibility and the gate (who may fetch the files:
        :meth:`.access.Gate.may_fetch`)."""
        repo_id = requested_repo(request)
        self.writers.writer(request, repo_id)
        body = await json_body(request)
        if body is NOT_JSON or not isinstance(body, dict):
            return error(400, None, "expected a JSON body")
        gated = gate_of(body)
        private = visibility_of(body)
        if private is not None or gated is not None:
            await in_thread(set_settings, self.committer.repos, repo_id, private, gated)
        return JSONResponse({})
