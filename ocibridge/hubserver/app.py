"""The shell of serve: what the routes share (:class:`ServeApp`) and the guard every API route
answers through (the read token checked by :class:`.access.Gate`, an exception answered by the
one table of :mod:`.failures`); the ASGI application and its one route table: :mod:`.asgiapp`.
The routes themselves live by protocol and side: :mod:`.reading` (the read API), :mod:`.lfs`
and :mod:`.xet` (uploads and Xet reads), :mod:`.writeroutes` (repositories, commits, refs),
:mod:`.web` (the pages).

Routes (huggingface_hub's, from its hf_api.py, file_download.py and hf_file_system.py), each a
Starlette route (:mod:`.routing`: matched on the raw path, so a revision or a path sent quoted,
``refs%2Fpr%2F1``, stays one segment), REPO being ``ORG/NAME`` or ``NAME``:

    ...  the read API (model_info, list_repo_tree, list_repo_refs, paths-info, resolve): :mod:`.reading.routes`
    GET  /api/models/REPO/xet-read-token/{rev}              a Xet access token (hf_xet)
    GET  /xet/{commit}/REPO/v1|v2/reconstructions/{file}    where a file's pieces are (:mod:`.xet.routes`)
    GET  /xet/{commit}/REPO/xorbs/{sha256}/{size}/{k}       the pieces (a signed URL)
    GET  /api/models/REPO/xet-write-token/{rev}             uploads over Xet (:mod:`.xet.upload`),
    POST /xet-write/REPO/v1/xorbs/..., /v1|v2/shards        ... to the CAS URL it hands out
    GET  /healthz, /readyz; GET /api/agent-harnesses, POST /v1/telemetry (housekeeping.py)
    GET  /, /models, /REPO, /REPO/tree/..., /REPO/blob/...  the web pages (:mod:`.web.pages`), tried last
    GET  /REPO/commits/{rev}, /REPO/commit/{rev}, /REPO/compare/{a}...{b}   history pages (:mod:`.web.historypages`)
    ...  the write API (create_repo, preupload, LFS batch and uploads, commit, whoami): :mod:`.writeroutes`, :mod:`.lfs`

Every ``/api/models/...`` route is also ``/api/datasets/...``, every file, upload, Xet and page path
``/REPO/...`` also ``/datasets/REPO/...`` (a dataset's: :mod:`.repo.keys`), the same handlers and
access rules. A repo id of two parts is tried before one of a single part; under ``/api/models/REPO/`` the
word after REPO names the route (a path no route of that word takes is not found, never read
another way). Every other path is a 404, after the read token is checked (but under ``/xet/``,
whose routes have their own grants). Not-found answers carry the Hub's ``X-Error-Code``
(``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``), so the client raises its own errors.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.access import Access, Gate
from ocibridge.hubserver.answers import bearer, error, requested_repo
from ocibridge.hubserver.audit import AuditLog, note
from ocibridge.hubserver.failures import CAUGHT, failure_of
from ocibridge.hubserver.lfs.routes import LfsRoutes
from ocibridge.hubserver.metrics import Metrics
from ocibridge.hubserver.quotas import UNLIMITED
from ocibridge.hubserver.quotas.ingests import IngestLimits
from ocibridge.hubserver.quotas.served import QuotaMetrics, ingest_limits, quotas_for
from ocibridge.hubserver.reading.blobs import Blobs
from ocibridge.hubserver.reading.routes import ReadRoutes
from ocibridge.hubserver.replicas.forward import FORWARDED, Forwarder
from ocibridge.hubserver.replicas.identity import release as release_identity
from ocibridge.hubserver.replicas.lease import Lease, LeaseLost
from ocibridge.hubserver.replicas.leasing import lease_for
from ocibridge.hubserver.replicas.peers import Peers
from ocibridge.hubserver.repo.catalog import Catalog, Resolved
from ocibridge.hubserver.repo.committing import Committer
from ocibridge.hubserver.repo.deletes import home
from ocibridge.hubserver.repo.files import FileLists, ModelFiles
from ocibridge.hubserver.repo.lfsobjects import LfsObjects
from ocibridge.hubserver.repo.quarantined import QuarantineBook
from ocibridge.hubserver.repo.repos import Repos
from ocibridge.hubserver.repo.sources import RegistrySource, RepoMoved, RepoNotFound
from ocibridge.hubserver.routing import route_path
from ocibridge.hubserver.settings import ServeSettings
from ocibridge.hubserver.tokenfile import TokenFile
from ocibridge.hubserver.uploads.mounts import Mounts
from ocibridge.hubserver.uploads.relay import handing_for, relay_for, relays
from ocibridge.hubserver.uploads.staging import Staging
from ocibridge.hubserver.uploads.xetassembly import ingest_for
from ocibridge.hubserver.upstream.errors import FetchedElsewhere
from ocibridge.hubserver.upstream.servingside import CatalogFor
from ocibridge.hubserver.web.compare import Compare
from ocibridge.hubserver.web.historypages import HistoryPages
from ocibridge.hubserver.web.pages import WebPages
from ocibridge.hubserver.writeaccess import Writers
from ocibridge.hubserver.writeroutes.accessroutes import AccessRequests
from ocibridge.hubserver.writeroutes.account import AccountRoutes
from ocibridge.hubserver.writeroutes.commit import CommitRoutes
from ocibridge.hubserver.writeroutes.creating import Creating
from ocibridge.hubserver.writeroutes.deleting import Deleting
from ocibridge.hubserver.writeroutes.lfsduplicate import LfsDuplicate
from ocibridge.hubserver.writeroutes.lfsfiles import LfsFiles
from ocibridge.hubserver.writeroutes.moving import Moving
from ocibridge.hubserver.writeroutes.refs import RefRoutes
from ocibridge.hubserver.writeroutes.squashing import Squashing
from ocibridge.hubserver.xet.announced import Announced
from ocibridge.hubserver.xet.routes import XetRoutes
from ocibridge.hubserver.xet.upload import XetUpload
from ocibridge.hubserver.xet.writegrant import write_grant

if TYPE_CHECKING:
    from ocibridge.hubserver.reading.ranges import ChunkRanges
    from ocibridge.hubserver.repo.publishing import Publishing
    from ocibridge.hubserver.web.compare import Diff

log = logging.getLogger("ocibridge.hubserver")

_T = TypeVar("_T")
Handler = Callable[[Request], Awaitable[Response]]

#: what a write answers as the Hub's 507 (its disk or quota full) rather than a 500 clients retry
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


class ServeApp:
    """What the routes share: the sources, the file lists, the blobs, who may do what, and the
    settings; each route set by protocol and side."""

    def __init__(self, catalog: Catalog | CatalogFor, lists: FileLists, blobs: Blobs, settings: ServeSettings, *,
                 ranges: ChunkRanges | None = None, publish: Publishing | None = None,
                 staging: Staging | None = None, diff: Diff | None = None):
        catalog = self.catalog = catalog if isinstance(catalog, Catalog) else catalog(self)  # --upstream: built for it
        self.lists = lists
        self.blobs = blobs
        self.ranges = ranges
        self.settings = settings
        watched = TokenFile(settings.token_file) if settings.token_file else None  # re-read when it changes
        self.gate = Gate(settings.tokens, source=watched, missing=catalog.missing,  # TOKEN ... (access.py)
                         private=catalog.states.private, gated=catalog.states.gated, deleted=catalog.states.deleted,
                         accepted=catalog.states.accepted)
        # --scan quarantine: released by the reports its keys signed
        self.quarantine = QuarantineBook(settings.quarantine) if settings.quarantine is not None else None
        self.audit = AuditLog(settings.audit_log)  # a JSON line per write (audit.py)
        self.xet = XetRoutes(self.model, blobs, ranges, signer=self.gate.xet, xet_min=settings.xet_min,
                             public_url=settings.public_url, still_reads=self.gate.still_reads)
        self.staging = staging or Staging()  # one staging area: an upload by either protocol, any commit
        self.metrics = Metrics(self.staging.used, lambda: blobs.hits, lambda: blobs.fetched)  # GET /metrics
        self.staging.writers = lambda: sum(1 for g in self.gate.grants if g.write)  # each one's share (shares.py)
        first = catalog.sources[0] if catalog.sources else None
        mounts = Mounts(first if isinstance(first, RegistrySource) else None)  # unchanged files, not sent
        self.repos = Repos(catalog, lists, self.staging, mounts, self.staging.root.parent / "created")  # no HTTP
        self.writers = Writers(self.gate, settings)  # who may write: every write route asks it
        self.account = AccountRoutes(self.gate)
        relay = partial(relay_for, first)  # to the first source
        quotas = quotas_for(settings, first)  # serve --quotas: asked by every route before it takes bytes
        self.quotas = quotas or UNLIMITED
        announced = Announced()  # the files each preupload sends over Xet: several are not built ahead
        self.lfs = LfsRoutes(self.writers, self.repos, self.staging, partial(handing_for, first),
                             partial(relays, first), partial(write_grant, self.gate.xet, self.xet.base), self.quotas,
                             announced.files)
        self.committer = Committer(self.repos, publish, self.quotas)  # the one commit path (repo/committing.py)
        self.commits = CommitRoutes(self.writers, self.committer)
        self.refs = RefRoutes(self.writers, self.committer)
        self.creating = Creating(self.writers, self.committer)  # create_repo, settings
        self.access_requests = AccessRequests(self.writers, self.repos)  # a gated repository's requests
        self.deleting = Deleting(self.writers, self.repos)
        self.squashing = Squashing(self.writers, self.repos, publish)
        self.moving = Moving(self.writers, self.repos)
        self.lfs_files = LfsFiles(self.writers, LfsObjects(self.repos, publish))
        self.lfs_duplicate = LfsDuplicate(self.writers, catalog)
        self.reads = ReadRoutes(catalog, self.model, blobs, ranges, self.xet, settings, self.repos.created_empty, lists)
        self.xet_upload = XetUpload(self.staging, self.gate.xet, self.xet.base,  # uploads over Xet
                                    blobs=mounts, relay=relay, ingest=partial(ingest_for, first), quotas=self.quotas,
                                    announced=announced)
        self.metrics.xorbs_reading = lambda: self.xet_upload.reading
        if quotas is not None and settings.metrics:
            self.metrics.registry.register(QuotaMetrics(quotas))
        # what the proxy's clients may have it fetch: asked by the upstream at each fetch (ingest_limits)
        self._ingest_limits = ingest_limits(quotas, settings) if catalog.upstream is not None else IngestLimits(None)
        # the compare pages' diffs (ocibridge diff's), under their read budgets, kept
        self.compare = Compare(catalog, diff, page_budget=settings.compare_budget)
        self.web = WebPages(self, settings)  # the pages: routed after every API route
        self.history_pages = HistoryPages(self.web, self.compare)  # its commits and compare pages
        self.forwarder = Forwarder(settings.writer) if settings.writer else None  # a reader's writes: the writer's
        self.peers = Peers(settings.peers)  # a standby's writes: the lease holder's, when it is a --peer
        # one writer a SOURCE, enforced: a reader takes no lease, its writes go to the writer
        self.lease = Lease() if self.forwarder else lease_for(first, settings.lease, self.staging.root.parent,
                                                              settings.public_url)
        self.repos.lease = self.lease

    def freeing(self, answer: Handler, audit: str) -> Handler:
        """A write that may free bytes (a delete, a squash, a move): once answered, every
        namespace's usage is read again when next asked (serve --quotas)."""
        written = self.writing(answer, audit=audit)
        if self.forwarder is not None and written == self.forwarder.forward:
            return written  # a reader's: the writer frees the bytes and recounts them

        async def recounted(request: Request) -> Response:
            try:
                return await written(request)
            finally:
                self.quotas.recount()

        return recounted

    def standing_by(self) -> str | None:
        """Why writes are not taken here, for the start line (None: they are): refused, or sent
        to the holder of the lease when it is a --peer."""
        holder = self.lease.holder()
        if holder is not None and self.peers.forwarder_for(holder) is not None:
            return f"writes sent to {holder.shown()}, which holds the writer lease (--peer)"
        return self.lease.standing_by()

    def fetches_here(self) -> bool:
        """Whether a proxy's miss is fetched by this serve: not on a ``--writer`` reader, nor on a
        standby while another serve holds the writer lease (the writer fetches once for all)."""
        return self.forwarder is None and self.lease.holder() is None

    def upstream_refuses(self, repo_id: str, *, private: bool, gated: str) -> Exception | None:
        return self.gate.upstream_refuses(repo_id, private=private, gated=gated)  # (access.py)

    def audit_line(self, entry: dict[str, Any]) -> None:
        self.audit.record(entry)

    def ingest_limits(self) -> IngestLimits:
        return self._ingest_limits

    def writer_of_reads(self) -> Forwarder | None:
        """Where a read that would start a fetch goes: the ``--writer``, or the lease holder when
        it is a ``--peer``; None when no writer is known here."""
        return self.forwarder or self.peers.forwarder_for(self.lease.holder())

    def close(self) -> None:
        """Leave the sources and the blobs being read in chunks (the chunks verified so far
        stay in the model cache), once the shards answered are recorded for dedupe."""
        self.lease.close()  # released: another serve takes the writes at once
        release_identity(self.staging.root.parent)  # its lock on the cache's writer id
        self.xet_upload.close()  # the records of the shards answered written, its writers ended
        if self.ranges is not None:
            self.ranges.close()
        self.catalog.close()
        self.audit.close()

    # -- plumbing --------------------------------------------------------------------------
    async def _run(self, call: Callable[..., _T], *args: Any) -> _T:
        return await anyio.to_thread.run_sync(call, *args)

    def writing(self, answer: Handler, needs_token: bool = True, *, audit: str = "",
                refusals_only: bool = False) -> Handler:
        """A route that writes: ``answer`` guarded, or, on a reader (``--writer``), the
        request sent to the writer (:mod:`.replicas.forward`), which checks the token itself.
        ``audit``: its action in the audit log, written where the write is decided (the writer;
        ``refusals_only``: a line only when refused, :meth:`.audit.AuditLog.audited`)."""
        if self.forwarder is not None:
            return self.forwarder.forward

        async def leased(request: Request) -> Response:
            # taken only while this serve holds the writer lease (replicas/lease.py): else sent to
            # the holder when it is a --peer (replicas/peers.py), else the Hub's 503 naming it; a
            # serve with no write token takes no lease (the token refuses)
            if not self.lease.holding() and any(g.write for g in self.gate.grants):
                try:
                    await self._run(self.lease.admit)
                except LeaseLost as refused:
                    peer = self.peers.forwarder_for(refused.holder)
                    if peer is None:
                        raise
                    note(request, forwarded_to=peer.writer)  # its audit line: decided by the holder
                    return await peer.forward(request)
            return await answer(request)

        guarded = self.guarded(leased, needs_token)
        return self.audit.audited(audit, guarded, refusals_only=refusals_only) if audit else guarded

    def guarded(self, answer: Handler, needs_token: bool = True, *, files: bool = False) -> Handler:
        """``answer`` behind the read token (``needs_token``), its errors as the Hub's
        (:mod:`.failures`). ``files``: the route hands out a file's bytes (or the means to fetch
        them), which a gated repository gives to its gate's readers only (:meth:`.Gate.may_fetch`)."""

        async def endpoint(request: Request) -> Response:
            try:
                if needs_token:
                    repo_id = requested_repo(request) if "name" in request.path_params else None
                    self.gate.require(request, repo_id, Access.READ)
                    if files and repo_id is not None:
                        await self._run(self.gate.may_fetch, request, repo_id)
                    if self.quarantine is not None and repo_id is not None:  # --scan quarantine
                        await self._run(self.held_back, request, repo_id)
                return await answer(request)
            except FetchedElsewhere as e:  # serve --upstream, not the writer: the writer fetches it, once
                busy = error(503, None, f"{e}; try again shortly", {"Retry-After": str(e.retry_after)})
                writer = self.writer_of_reads()
                if writer is None or FORWARDED in request.headers:  # forwarded here: never sent on again
                    return busy
                note(request, forwarded_to=writer.writer)
                return await writer.forward(request, unreachable=busy)
            except CAUGHT as e:
                if isinstance(e, RepoMoved) and request.method in ("GET", "HEAD"):
                    return moved_answer(request, e)
                failure = failure_of(e, f"{request.method} {request.url.path}")
                later = {"Retry-After": str(failure.retry_after)} if failure.retry_after else None
                # the Hub's answer to a request without a token for a repository it does not show
                # (missing or private alike): 401, where serve has tokens to send (an open serve: 404)
                unsigned = isinstance(e, RepoNotFound) and not bearer(request) and not self.gate.open
                status = 401 if unsigned else failure.status
                refused = error(status, failure.code, failure.message, later)
                if isinstance(e, RepoNotFound) and self.forwarder is not None and request.method in ("GET", "HEAD"):
                    # a repository create_repo made and no commit reached yet is known to the writer
                    # alone (repo/pendingrepos.py): it answers, and says 404 when it does not know it either
                    return await self.forwarder.forward(request, unreachable=refused)
                return refused
            except OSError as e:
                if e.errno not in DISK_FULL:
                    raise
                log.error("%s %s: serve's disk is full (%s): refused with 507", request.method, request.url.path, e)
                return error(507, None, "Insufficient Storage: serve's disk is full (" + (e.strerror or str(e)) +
                             "); nothing of this request was kept: send it again once there is room")

        return endpoint

    async def model(self, repo_id: str, revision: str | None, *,
                    reuse_for: float = 0) -> tuple[Resolved, ModelFiles]:
        """The model a revision names and its files: the one resolution both route sets make
        (``reuse_for``: :meth:`Catalog.resolve`'s)."""
        resolved = await self._run(lambda: self.catalog.resolve(repo_id, revision, reuse_for=reuse_for))
        files = await self._run(self.lists.of, resolved)
        return resolved, files

    def held_back(self, request: Request, repo_id: str) -> None:
        """The revision a read names refused to all but the repository's owners while it is
        quarantined (:mod:`.repo.quarantined`); one that does not resolve is the route's to answer."""
        if self.quarantine is None:
            return
        try:
            resolved = self.catalog.resolve(repo_id, request.path_params.get("revision"))
        except OcibridgeError:
            return
        self.gate.may_fetch_held(request, repo_id, self.quarantine.held(resolved))

    # -- routes (the table: :mod:`.asgiapp`) ---------------------------------------------------
    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(self, request: Request) -> Response:
        problems = []
        for source in self.catalog.sources:
            try:
                await self._run(source.ready)
            except Exception as e:  # noqa: BLE001 - whatever it is, the source is not ready
                problems.append(f"{source.shown}: {e}")
        if problems:
            return JSONResponse({"status": "unavailable", "problems": problems}, status_code=503)
        return JSONResponse({"status": "ready"})

    async def no_route(self, request: Request) -> Response:
        return error(404, None, f"no such route: {request.url.path}")

    async def not_found(self, request: Request) -> Response:
        """A path no route takes: under ``/xet/`` without a token (hf_xet sends none)."""
        xet = route_path(request.scope).startswith("/xet/")
        return await self.guarded(self.no_route, needs_token=not xet)(request)

    async def auth_check(self, request: Request) -> Response:
        """``auth_check``: the request's token reads the repository (the guard checked it), and
        it exists; else the Hub's RepoNotFound."""
        await self._run(home, self.repos, requested_repo(request))
        return JSONResponse({})

    async def auth_check_write(self, request: Request) -> Response:
        """``auth_check(write=True)``: and the token writes it."""
        self.writers.writer(request, requested_repo(request))
        return await self.auth_check(request)

    async def xet_write_token(self, request: Request) -> Response:
        """A Xet write grant, for a write token of the repository only (the LFS routes' check)."""
        self.writers.writer(request, requested_repo(request))
        await self._run(self.quotas.room, requested_repo(request))  # serve --quotas: at its limit, no grant
        return await self.xet_upload.token(request)

    async def xet_token(self, request: Request) -> Response:
        return await self.xet.token(request, requested_repo(request), request.path_params["revision"])


def moved_answer(request: Request, moved: RepoMoved) -> Response:
    """A read of a repository ``move_repo`` moved: the Hub's 307 to the same path under its new id
    (relative, so huggingface_hub follows it: it follows redirects to its own host only)."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    path = raw.decode("latin-1")
    old = f"/{moved.repo_id}"
    at = path.lower().find(old.lower() + "/") if not path.lower().endswith(old.lower()) else len(path) - len(old)
    if at < 0:
        return error(404, "RepoNotFound", "Repository not found")
    target = path[:at] + f"/{moved.moved_to}" + path[at + len(old):]
    query = request.url.query
    return Response(status_code=307, headers={"Location": target + (f"?{query}" if query else ""),
                                              "X-Error-Message": f"Repository moved to {moved.moved_to}"})
