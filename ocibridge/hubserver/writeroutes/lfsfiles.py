"""A repository's LFS objects, listed and permanently deleted (huggingface_hub's ``list_lfs_files``
and ``permanently_delete_lfs_files``): the requests read and answered; what is listed, and the
history a delete rewrites, is :mod:`ocibridge.hubserver.repo.lfsobjects`'s.

    GET  /api/models/REPO/lfs-files            every file in git-lfs any commit of a branch holds
    POST /api/models/REPO/lfs-files/batch      {deletions: {sha: [...], rewriteHistory}}
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.hubserver.answers import NOT_JSON, error, in_thread, is_sha256, json_body, requested_repo
from ocibridge.hubserver.audit import note
from ocibridge.hubserver.repo.lfsobjects import LfsObjects
from ocibridge.hubserver.writeaccess import Writers

#: objects one batch deletes at most (huggingface_hub sends 1,000 a request)
DELETIONS_MAX = 1000


class LfsFiles:
    """The LFS files routes: who may write (``writers``), the objects listed and deleted (``objects``)."""

    def __init__(self, writers: Writers, objects: LfsObjects):
        self.writers = writers
        self.objects = objects

    async def listed(self, request: Request) -> Response:
        objects = await in_thread(self.objects.objects, requested_repo(request))
        return JSONResponse([o.as_json() for o in objects])

    async def delete(self, request: Request) -> Response:
        repo_id = requested_repo(request)
        grant = self.writers.writer(request, repo_id)
        body = await json_body(request)
        deletions = body.get("deletions") if isinstance(body, dict) and body is not NOT_JSON else None
        shas = deletions.get("sha") if isinstance(deletions, dict) else None
        if not isinstance(shas, list) or not all(is_sha256(s) for s in shas) or len(shas) > DELETIONS_MAX:
            return error(400, None, f"expected {{'deletions': {{'sha': [at most {DELETIONS_MAX} sha256], "
                         "'rewriteHistory': true}}")
        rewritten = await in_thread(self.objects.delete, repo_id, {f"sha256:{s}" for s in shas}, grant.name)
        note(request, removed=sorted(shas))
        return JSONResponse({"rewritten": rewritten})
