"""``super_squash_history`` (``POST /api/models/REPO/super-squash/{branch}``, huggingface_hub's
hf_api.py): the request read and answered; the squash (the head's manifest written again with no
parent, landed as every commit lands) is :mod:`ocibridge.hubserver.repo.squash`'s.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.hubserver.answers import NOT_JSON, branch_of, in_thread, json_body, requested_repo
from ocibridge.hubserver.audit import note
from ocibridge.hubserver.repo import commits
from ocibridge.hubserver.repo.publishing import Publishing
from ocibridge.hubserver.repo.repos import Repos
from ocibridge.hubserver.repo.squash import squash
from ocibridge.hubserver.writeaccess import Writers


class Squashing:
    """The squash route; ``publishing``: how commits are signed (None: this serve makes no commits)."""

    def __init__(self, writers: Writers, repos: Repos, publishing: Publishing | None):
        self.writers = writers
        self.repos = repos
        self.publishing = publishing

    async def squash(self, request: Request) -> Response:
        repo_id = requested_repo(request)
        grant = self.writers.writer(request, repo_id)
        if self.publishing is None:
            raise commits.BadCommit("this serve does not publish (its application was built without publishing)")
        branch = branch_of(request.path_params["branch"])
        body = await json_body(request) if await request.body() else {}
        message = body.get("message") if isinstance(body, dict) and body is not NOT_JSON else None
        summary = message if isinstance(message, str) and message else f"Super-squash branch '{branch}'"
        commit = await in_thread(squash, self.repos, self.publishing, repo_id, branch,
                                 summary[:commits.TEXT_MAX], grant.name)
        note(request, commit=commit)
        return JSONResponse({"commitOid": commit})
