"""The delete routes (huggingface_hub's ``delete_repo``, ``delete_branch``, ``delete_tag``): the
request read and answered; what a delete writes (the refs record first, then every tag moved to
the tombstone) is :mod:`ocibridge.hubserver.repo.deletes`'s.

    DELETE /api/repos/delete                     {name, organization}: the repository
    DELETE /api/models/REPO/branch/{name}        a branch (never ``main``)
    DELETE /api/models/REPO/tag/{name}           a Hub tag
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.hubserver.answers import branch_of, in_thread, requested_repo
from ocibridge.hubserver.audit import note
from ocibridge.hubserver.repo.deletes import delete_ref, delete_repo
from ocibridge.hubserver.repo.repos import Repos
from ocibridge.hubserver.writeaccess import Writers
from ocibridge.hubserver.writeroutes.creating import named_repo


class Deleting:
    """The delete routes: who may write (``writers``), the repositories deleted from (``repos``)."""

    def __init__(self, writers: Writers, repos: Repos):
        self.writers = writers
        self.repos = repos

    async def delete_repo(self, request: Request) -> Response:
        _, _, repo_id = await named_repo(self.writers, request)
        note(request, repository=repo_id)
        self.writers.writer(request, repo_id)
        await in_thread(delete_repo, self.repos, repo_id)
        return JSONResponse({})

    async def delete_ref(self, request: Request) -> Response:
        """``delete_branch`` and ``delete_tag``: the ref the path names, deleted."""
        repo_id = requested_repo(request)
        self.writers.writer(request, repo_id)
        kind = request.path_params["kind"]
        name = branch_of(request.path_params["ref"]) if kind == "branch" else request.path_params["ref"]
        name = name.removeprefix("refs/tags/")
        await in_thread(delete_ref, self.repos, repo_id, name, kind == "branch")
        return JSONResponse({})
