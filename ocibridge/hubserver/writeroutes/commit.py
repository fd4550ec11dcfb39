"""The commit route of the write API (huggingface_hub's create_commit, _commit_api.py): the
files a commit names (uploaded over LFS or Xet into :class:`.Staging`, inline in its body, kept
from the branch's head, or mounted from another repository) become a new manifest on the branch.

    POST /api/models/REPO/commit/{rev}       the commit (:mod:`.commits`): a new manifest

The commit itself (the branch locked, the tree built, the artifact written) is
:class:`.repo.committing.Committer`'s, the one path every commit takes.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.answers import branch_of, error, in_thread, requested_repo
from ocibridge.hubserver.audit import noted
from ocibridge.hubserver.repo import commits
from ocibridge.hubserver.repo.committing import Committer
from ocibridge.hubserver.repo.refrules import hub_ref_name
from ocibridge.hubserver.repo.sources import COMMIT
from ocibridge.hubserver.writeaccess import Writers
from ocibridge.hubserver.writeroutes.inlinebudget import InlineBudget, InlineBusy, InlineHold, declared_length
from ocibridge.oci.bookkeeping import PREFIX, is_bookkeeping


class CommitRoutes:
    """The commit route: the request read and answered; ``committer`` makes the commit."""

    def __init__(self, writers: Writers, committer: Committer):
        self.writers = writers
        self.committer = committer
        self.inline_budget = InlineBudget()  # every commit's inline lines held at once

    async def commit(self, request: Request) -> Response:
        repo_id = requested_repo(request)
        allowed = self.writers.writer(request, repo_id)
        await in_thread(self.committer.quotas.room, repo_id)  # at its limit: refused before the body is read
        if self.committer.publishing is None:
            return error(403, None, "this serve does not publish (its application was built without publishing)")
        if request.query_params.get("create_pr") in ("1", "true"):
            return error(400, None, "serve makes no pull requests: commit to a branch")
        branch = branch_of(request.path_params["revision"])
        if COMMIT.fullmatch(branch.lower()):
            return error(400, "BadRequest", f"Invalid rev id: {branch}: a commit id names no branch to commit to")
        if is_bookkeeping(branch):
            return error(400, "BadRequest", f"Invalid rev id: {branch}: names starting with '{PREFIX}' are serve's "
                         "own bookkeeping tags, never a branch")
        try:
            hub_ref_name(branch)
        except OcibridgeError as e:
            raise commits.BadCommit(f"{branch}: not a branch serve can write: {e}") from None
        # a BadCommit: 400, StagingFull: 507 (failures.py)
        author = self.writers.author(allowed)
        payload = await self._read(request, repo_id, author.staged_as)
        # StaleParent: 412, MissingEntry: 404, BadCommit: 400, UnknownContent: 422 (failures.py)
        landed = await in_thread(self.committer.commit, repo_id, branch, payload, author)
        noted(request, landed)  # its audit line (audit.py)
        oid = landed.commit
        url = f"{self.writers.base(request)}/{repo_id}/commit/{oid}"
        return JSONResponse({"success": True, "commitOid": oid, "commitUrl": url, "pullRequestUrl": None})

    async def _read(self, request: Request, repo_id: str, writer: str) -> commits.CommitRequest:
        """The commit's payload, read as it comes: each file sent inline staged as its line
        arrives, so a commit holds one line of its body at a time, not the body."""
        payload = commits.CommitRequest()
        number = 0
        # its inline lines' bytes out of the budget every commit shares, taken once a line is large
        hold = InlineHold(self.inline_budget, declared_length(request), commits.LINE_MAX)
        chunks = request.stream()
        try:
            async for line in commits.lines(chunks, held=hold.pending):
                number += 1
                inline = commits.read_line(payload, number, line)
                del line
                if inline is not None:
                    await in_thread(self.committer.stage_bytes, repo_id, *inline, writer)
                    del inline
        except InlineBusy:
            hold.close()
            async for _ in chunks:  # the rest of the body, read and dropped: the client reads the 503
                pass
            raise
        finally:
            hold.close()
        return commits.checked(payload)
