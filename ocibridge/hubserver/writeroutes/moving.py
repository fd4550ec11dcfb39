"""``move_repo`` (``POST /api/repos/move`` ``{fromRepo, toRepo, type}``, huggingface_hub's hf_api.py):
the request read and answered; the move itself (the new refs record first, every live tag
copied, then the old repository deleted) is :mod:`ocibridge.hubserver.repo.moves`'s.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.hubserver.answers import error, in_thread
from ocibridge.hubserver.audit import note
from ocibridge.hubserver.repo.moves import move_repo
from ocibridge.hubserver.repo.repos import Repos
from ocibridge.hubserver.repo.sources import repo_parts
from ocibridge.hubserver.writeaccess import Writers
from ocibridge.hubserver.writeroutes.creating import repo_body, repo_key


class Moving:
    """The move route: who may write both ids (``writers``), the repositories (``repos``)."""

    def __init__(self, writers: Writers, repos: Repos):
        self.writers = writers
        self.repos = repos

    async def move_repo(self, request: Request) -> Response:
        body, repo_type = await repo_body(request)
        old, new = body.get("fromRepo"), body.get("toRepo")
        if not isinstance(old, str) or not isinstance(new, str) or "/" not in old or "/" not in new:
            return error(400, "BadRequest", "Invalid repo_id: fromRepo and toRepo are namespace/repo_name")
        old, new = repo_key(repo_type, old), repo_key(repo_type, new)  # both of the body's type
        if repo_parts(old) is None or repo_parts(new) is None:
            return error(400, "BadRequest", "Invalid repo_id: fromRepo and toRepo are namespace/repo_name")
        note(request, repository=old, revision=new)
        self.writers.writer(request, old)
        self.writers.writer(request, new)
        await in_thread(move_repo, self.repos, old, new)  # a target that exists: failures.py's 409
        return JSONResponse({})
