"""A gated repository's access requests, through the Hub's routes (huggingface_hub's
``list_pending_access_requests``, ``accept_access_request``, ``reject_access_request``,
``cancel_access_request``, ``grant_access``), and the caller's own ask:

    POST /api/models/REPO/user-access-request                 a caller asks (any token that reads REPO)
    GET  /api/models/REPO/user-access-request/pending         the owners list (accepted, rejected alike)
    POST /api/models/REPO/user-access-request/handle          {user, status, rejectionReason}: an owner decides
    POST /api/models/REPO/user-access-request/grant           {user}: an owner lets one in who never asked

The owners are the tokens that write the repository; a caller is its token's name. What is asked
and decided is kept in the repository's refs record (:mod:`ocibridge.hubserver.repo.accessrequests`).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.hubserver.access import Denied, grant_of
from ocibridge.hubserver.answers import NOT_JSON, error, in_thread, json_body, requested_repo
from ocibridge.hubserver.audit import note
from ocibridge.hubserver.repo.accessrequests import ask, decide, listed
from ocibridge.hubserver.repo.refsrecord import ASK_STATES, read_record
from ocibridge.hubserver.repo.repos import Repos
from ocibridge.hubserver.writeaccess import Writers


class AccessRequests:
    """The routes of access requests over ``repos`` (their records), owners decided by ``writers``."""

    def __init__(self, writers: Writers, repos: Repos):
        self.writers = writers
        self.repos = repos

    async def ask(self, request: Request) -> Response:
        """The caller (its token's name) asks for the gated repository's files; its state answered."""
        repo_id = requested_repo(request)
        grant = grant_of(request)
        if grant is None or grant.anonymous:
            raise Denied(401, "an access request needs a token: it is made in the token's name")
        note(request, repository=repo_id)
        status = await in_thread(ask, self.repos, repo_id, grant.name)
        return JSONResponse({"user": grant.name, "status": status})

    async def listing(self, request: Request) -> Response:
        """The requests in one state (``{status}``), for the repository's owners."""
        repo_id = requested_repo(request)
        status = request.path_params["status"]
        if status not in ASK_STATES:
            return error(404, None, f"no such list: {status!r} (expected one of {', '.join(ASK_STATES)})")
        self.writers.writer(request, repo_id)
        repo = self.repos.first_repository(repo_id)
        record = None if repo is None else await in_thread(read_record, repo)
        asks = [] if record is None else listed(record, status)
        return JSONResponse([{"user": {"user": a.user, "fullname": a.user}, "requestId": a.user,
                              "status": a.status, "timestamp": a.timestamp} for a in asks])

    async def handle(self, request: Request) -> Response:
        """An owner accepts, rejects or sets back to pending one request (by user or request id)."""
        return await self._decided(request, grant=False)

    async def grant(self, request: Request) -> Response:
        """An owner accepts a user who never asked (``grant_access``)."""
        return await self._decided(request, grant=True)

    async def _decided(self, request: Request, *, grant: bool) -> Response:
        repo_id = requested_repo(request)
        self.writers.writer(request, repo_id)
        body = await json_body(request)
        if body is NOT_JSON or not isinstance(body, dict):
            return error(400, None, "expected a JSON body")
        user = body.get("user") or body.get("requestId")
        status = "accepted" if grant else body.get("status")
        if not isinstance(user, str) or not user or not isinstance(status, str):
            return error(400, None, "expected {'user': NAME, 'status': 'accepted'|'rejected'|'pending'}")
        note(request, repository=repo_id, user=user, status=status)
        await in_thread(lambda: decide(self.repos, repo_id, user, status, grant=grant))
        return JSONResponse({})
