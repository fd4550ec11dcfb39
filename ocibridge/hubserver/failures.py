"""The one table from an exception to what serve answers: its HTTP status, the Hub's
``X-Error-Code`` (which huggingface_hub maps to its own exceptions: ``RepositoryNotFoundError``,
``RevisionNotFoundError``, ``GatedRepoError``, ``EntryNotFoundError``, ``BadRequestError``) and the
title a page heads it with. The API routes (:meth:`.app.ServeApp.guarded`) answer it as the Hub's
JSON error, the pages (:meth:`.web.pages.WebPages.page`) as an error page: one ladder, so a new
exception is answered the same way everywhere once it has its row here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.access import Denied
from ocibridge.hubserver.quotas.enforce import QuotaExceeded
from ocibridge.hubserver.quotas.ingests import IngestRateLimited
from ocibridge.hubserver.replicas.lease import LeaseLost
from ocibridge.hubserver.repo.branchlocks import RepoMoving
from ocibridge.hubserver.repo.commits import (
    BadCommit,
    EscapingPath,
    MissingEntry,
    ProtectedRef,
    StaleParent,
    UnknownContent,
)
from ocibridge.hubserver.repo.moves import Conflict
from ocibridge.hubserver.repo.refsrecord import RecordUnread
from ocibridge.hubserver.repo.sources import Refused, RepoNotFound, RevisionNotFound
from ocibridge.hubserver.uploads.staging import StagingFull
from ocibridge.hubserver.upstream.askbudget import AsksSpent
from ocibridge.hubserver.upstream.errors import UpstreamDown
from ocibridge.hubserver.writeroutes.inlinebudget import InlineBusy

log = logging.getLogger("ocibridge.hubserver")


@dataclass(frozen=True)
class Failure:
    """How one exception is answered."""

    status: int
    code: str | None  # X-Error-Code (None: the client raises a plain HTTP error)
    title: str  # a page's heading
    message: str
    retry_after: int | None = None  # seconds, for Retry-After: when asking again may be answered


#: first match wins: the specific rows before :class:`OcibridgeError`, their base
TABLE: tuple[tuple[type[Exception], int, str | None, str], ...] = (
    (RepoNotFound, 404, "RepoNotFound", "No such model"),
    (RevisionNotFound, 404, "RevisionNotFound", "No such revision"),
    # serve --quotas: the proxy's hourly allowance of a client (the Hub's rate limit), a namespace
    # full or an ingest too large (the Hub's storage limit: a 403 with no code); before Refused, their base
    (IngestRateLimited, 429, None, "Too many upstream fetches"),
    # serve --upstream-asks-per-client: one client's misses asked the upstream as often as it may
    (AsksSpent, 429, None, "Too many upstream asks"),
    (QuotaExceeded, 403, None, "Storage limit reached"),
    # the Hub's "there, not for you": every client raises it
    (Refused, 403, "GatedRepo", "Refused by the policy serve enforces"),
    (StaleParent, 412, None, "A commit has happened since"),
    (RepoMoving, 409, None, "The repository is being moved"),
    (Conflict, 409, None, "The target exists"),
    (ProtectedRef, 403, None, "A ref the Hub keeps"),
    (EscapingPath, 422, "BadRequest", "A path that climbs out of the repository"),
    (MissingEntry, 404, "EntryNotFound", "No such file"),
    (BadCommit, 400, "BadRequest", "Not a commit serve can make"),
    (UnknownContent, 422, "BadRequest", "A commit names bytes serve does not hold"),
    (StagingFull, 507, None, "No room for the upload"),
    # another serve holds the writer lease (replicas/lease.py): the Hub's "try again later"
    (LeaseLost, 503, None, "This serve does not take writes now"),
    # a refs record not read (repo/refsrecord.py): whether the repository is private, gated or
    # deleted is not known, so nothing that needs it is answered (fail closed), "try again later"
    (RecordUnread, 503, None, "Serve cannot read this repository's settings now"),
    # every commit's inline lines together at their budget (writeroutes/inlinebudget.py): later
    (InlineBusy, 503, None, "Too many inline files in flight"),
    # serve's --upstream cannot be reached: what it gave before is served, a miss waits (upstream/)
    (UpstreamDown, 503, None, "The upstream Hub cannot be reached now"),
    (OcibridgeError, 502, None, "The registry did not answer as expected"),
)


#: what a repository no source holds (or the request may not read) is answered with, as the Hub answers it
REPO_NOT_FOUND = "Repository not found"

#: seconds a request refused while the token file cannot be read is told to wait (it is looked
#: at again every second: tokenfile.py)
TOKEN_FILE_RETRY = 5

#: what the routes catch and answer by the table (anything else is a bug: the server's 500)
CAUGHT = (Denied, OcibridgeError)


def failure_of(error: Denied | OcibridgeError, where: str = "") -> Failure:
    """How ``error`` is answered. A :class:`.access.Denied` carries its own status (401 or 403).
    ``where`` (method and path) is logged with an error of the registry's."""
    if isinstance(error, Denied):  # a 503: the token file cannot be read now (access.py)
        return Failure(error.status, error.code, "Not allowed", str(error),
                       TOKEN_FILE_RETRY if error.status == 503 else None)
    status, code, title = next(row[1:] for row in TABLE if isinstance(error, row[0]))  # the last row: any
    if status == 502:
        log.warning("%s: %s", where, error)
    if isinstance(error, RepoNotFound):  # the Hub's words, which huggingface_hub's own message holds
        return Failure(status, code, title, REPO_NOT_FOUND)
    if isinstance(error, (LeaseLost, RecordUnread, InlineBusy, UpstreamDown, IngestRateLimited, AsksSpent)):
        return Failure(status, code, title, str(error), error.retry_after)
    return Failure(status, code, title, str(error))
