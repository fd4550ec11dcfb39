"""serve's ASGI application: the one route table over a :class:`.app.ServeApp` (every route of
:mod:`.app`'s docstring, in the order they are tried, each wrapped once by the shell), and the
middleware around it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route

from ocibridge.hubserver import housekeeping
from ocibridge.hubserver.app import ServeApp
from ocibridge.hubserver.grants import find
from ocibridge.hubserver.guard import Guard, Limits
from ocibridge.hubserver.lfs.routes import UPLOAD_PATH
from ocibridge.hubserver.reading.blobs import Blobs
from ocibridge.hubserver.replicas.trusted import TrustedForwarded
from ocibridge.hubserver.repo.catalog import Catalog
from ocibridge.hubserver.repo.files import FileLists
from ocibridge.hubserver.requestid import RequestId
from ocibridge.hubserver.routing import KEY_FORMS, REPO_FORMS, HubRoute
from ocibridge.hubserver.settings import ServeSettings
from ocibridge.hubserver.uploads.staging import Staging
from ocibridge.hubserver.upstream.fetchbounds import FetchClient
from ocibridge.hubserver.upstream.servingside import CatalogFor
from ocibridge.hubserver.upstream.staleness import StaleWarning
from ocibridge.hubserver.writeroutes.reserved import refusing_reserved

if TYPE_CHECKING:
    from ocibridge.hubserver.reading.ranges import ChunkRanges
    from ocibridge.hubserver.repo.publishing import Publishing
    from ocibridge.hubserver.web.compare import Diff

GET, GET_HEAD, ANY = ("GET",), ("GET", "HEAD"), ("GET", "HEAD", "POST")


def _access_routes(serve: ServeApp, base: str) -> list[BaseRoute]:
    """A gated repository's access requests (writeroutes/accessroutes.py)."""
    asks, at = serve.access_requests, f"{base}/user-access-request"
    return [HubRoute(at, serve.writing(asks.ask, audit="access_request"), methods=("POST",)),
            HubRoute(f"{at}/handle", serve.writing(asks.handle, audit="handle_access_request"), methods=("POST",)),
            HubRoute(f"{at}/grant", serve.writing(asks.grant, audit="grant_access"), methods=("POST",)),
            HubRoute(f"{at}/{{status:hub_part}}", serve.guarded(asks.listing), methods=GET)]


def route_table(serve: ServeApp) -> list[BaseRoute]:
    """Every route of ``serve``, in the order they are tried."""
    api: list[BaseRoute] = []
    for repo in REPO_FORMS:
        base = f"/api/{{repo_type:hub_api_type}}/{repo}"
        api += [
            HubRoute(f"{base}/preupload/{{revision:hub_part}}",
                     serve.writing(refusing_reserved(serve.lfs.preupload), audit="preupload",
                                  refusals_only=True), methods=("POST",)),
            HubRoute(f"{base}/commit/{{revision:hub_part}}",
                     serve.writing(refusing_reserved(serve.commits.commit), audit="commit"), methods=("POST",)),
            HubRoute(f"{base}/commits/{{revision:hub_part}}", serve.guarded(serve.refs.list_commits),
                     methods=GET),
            HubRoute(f"{base}/{{kind:hub_ref_kind}}/{{ref:hub_part}}",
                     serve.writing(refusing_reserved(serve.refs.create_ref), audit="create_{kind}"),
                     methods=("POST",)),
            HubRoute(f"{base}/{{kind:hub_ref_kind}}/{{ref:hub_part}}",
                     serve.freeing(refusing_reserved(serve.deleting.delete_ref), "delete_{kind}"),
                     methods=("DELETE",)),
            HubRoute(f"{base}/settings", serve.writing(serve.creating.settings, audit="update_settings"),
                     methods=("PUT",)),
            HubRoute(f"{base}/super-squash/{{branch:hub_part}}",
                     serve.freeing(refusing_reserved(serve.squashing.squash), "super_squash"),
                     methods=("POST",)),
            HubRoute(f"{base}/auth-check", serve.guarded(serve.auth_check, files=True), methods=GET),
            HubRoute(f"{base}/lfs-files", serve.guarded(serve.lfs_files.listed), methods=GET),
            HubRoute(f"{base}/lfs-files/batch", serve.freeing(serve.lfs_files.delete, "delete_lfs_files"),
                     methods=("POST",)),
            HubRoute(f"{base}/lfs-files/duplicate", serve.guarded(serve.lfs_duplicate.duplicate), methods=("POST",)),
            HubRoute(f"{base}/auth-check/write", serve.guarded(serve.auth_check_write), methods=GET),
            HubRoute(f"{base}/revision/{{revision:hub_rest}}", serve.guarded(serve.reads.model_info), methods=GET),
            HubRoute(f"{base}/tree/{{revision:hub_part}}", serve.guarded(serve.reads.tree), methods=GET),
            HubRoute(f"{base}/tree/{{revision:hub_part}}/{{path:hub_rest}}", serve.guarded(serve.reads.tree),
                     methods=GET),
            HubRoute(f"{base}/paths-info/{{revision:hub_part}}", serve.guarded(serve.reads.paths_info),
                     methods=("POST",)),
            HubRoute(f"{base}/refs", serve.guarded(serve.reads.refs), methods=GET),
            HubRoute(f"{base}/xet-read-token/{{revision:hub_part}}", serve.guarded(serve.xet_token, files=True),
                     methods=GET),
            HubRoute(f"{base}/xet-write-token/{{revision:hub_part}}",
                     serve.writing(serve.xet_write_token, audit="xet_write_token", refusals_only=True), methods=GET),
            *_access_routes(serve, base),
            # the word after the repo id names the route: a path none of them takes is not found
            HubRoute(f"{base}/{{verb:hub_keyword}}", serve.guarded(serve.no_route), methods=ANY),
            HubRoute(f"{base}/{{verb:hub_keyword}}/{{rest:hub_rest}}", serve.guarded(serve.no_route),
                     methods=ANY),
        ]
    api += [HubRoute(f"/api/{{repo_type:hub_api_type}}/{repo}", serve.guarded(serve.reads.model_info),
                     methods=GET) for repo in REPO_FORMS]
    files = [HubRoute(f"/{repo}/{route}/{{revision:hub_part}}{tail}",
                      serve.guarded(answer, files=True), methods=GET_HEAD)
             for route, answer in (("resolve", serve.reads.resolve_file), ("raw", serve.reads.raw_file))
             for repo in KEY_FORMS for tail in ("", "/{path:hub_rest}")]
    writes: list[BaseRoute] = [
        HubRoute("/api/whoami-v2", serve.guarded(serve.account.whoami, needs_token=False), methods=GET),
        HubRoute("/api/settings/repositories", serve.guarded(serve.reads.repositories), methods=GET),
        HubRoute("/api/organizations/{namespace:hub_part}/settings/repositories",
                 serve.guarded(serve.reads.repositories), methods=GET),
        HubRoute("/api/repos/create", serve.writing(serve.creating.create_repo, audit="create_repo"),
                 methods=("POST",)),
        HubRoute("/api/repos/delete", serve.freeing(serve.deleting.delete_repo, "delete_repo"),
                 methods=("DELETE",)),
        HubRoute("/api/repos/move", serve.freeing(serve.moving.move_repo, "move_repo"), methods=("POST",)),
        # no token, as the Hub: huggingface_hub sends none (RepoCard.validate, metadata_update)
        HubRoute("/api/validate-yaml", serve.guarded(serve.account.validate_yaml, needs_token=False),
                 methods=("POST",)),
        *[HubRoute(f"/{repo}.git/info/lfs/objects/batch",
                   serve.writing(serve.lfs.lfs_batch, audit="lfs_batch", refusals_only=True), methods=("POST",))
          for repo in KEY_FORMS],
        HubRoute(f"{UPLOAD_PATH}verify", serve.writing(serve.lfs.lfs_verify), methods=("POST",)),
        # multipart (lfs/multipart.py): signed URLs, as the single PUT's
        HubRoute(f"{UPLOAD_PATH}part/{{oid:hub_part}}/{{size:hub_part}}/{{chunk:hub_part}}/{{repo:hub_part}}/"
                 "{upload:hub_part}/{n:hub_part}", serve.writing(serve.lfs.multipart.put_part, needs_token=False),
                 methods=("PUT",)),
        HubRoute(f"{UPLOAD_PATH}complete/{{oid:hub_part}}/{{size:hub_part}}/{{chunk:hub_part}}/{{repo:hub_part}}"
                 "/{upload:hub_part}",
                 serve.writing(serve.lfs.multipart.complete, needs_token=False), methods=("POST",)),
        # no header comes with the bytes: the URL is signed (lfs/routes.py)
        HubRoute(f"{UPLOAD_PATH}{{oid:hub_part}}/{{size:hub_part}}/{{repo:hub_part}}",
                 serve.writing(serve.lfs.lfs_put, needs_token=False), methods=("PUT",)),
    ]
    xet: list[BaseRoute] = []
    for repo in KEY_FORMS:
        base = f"/xet/{{commit:hub_part}}/{repo}"
        xet += [
            HubRoute(f"{base}/{{version:xet_version}}/reconstructions/{{file_id:hub_part}}",
                     serve.guarded(serve.xet.reconstruction, needs_token=False), methods=GET),
            HubRoute(f"{base}/xorbs/{{sha256:hub_part}}/{{size:hub_number}}/{{k:hub_number}}",
                     serve.guarded(serve.xet.xorb, needs_token=False), methods=GET),
        ]
    for repo in KEY_FORMS:  # uploads over Xet (:mod:`.xet.upload`): their own grants, as reads
        cas, up = f"/xet-write/{repo}", serve.xet_upload
        xet += [HubRoute(f"{cas}/v1/xorbs/{{prefix:hub_part}}/{{hash:hub_part}}",
                         serve.writing(up.xorb, needs_token=False), methods=("POST",)),
                HubRoute(f"{cas}/v1/xorb-grants/{{rest:hub_rest}}", serve.writing(up.no_grant, needs_token=False),
                         methods=("POST",)),
                HubRoute(f"{cas}/{{version:xet_version}}/shards", serve.writing(up.shard, needs_token=False),
                         methods=("POST",)),
                HubRoute(f"{cas}/v1/chunks/{{prefix:hub_part}}/{{hash:hub_part}}",
                         serve.writing(up.chunk, needs_token=False), methods=GET)]
    return [
        Route("/healthz", serve.healthz, methods=["GET", "HEAD"]),
        Route("/readyz", serve.readyz, methods=["GET", "HEAD"]),
        Route("/api/agent-harnesses", housekeeping.agent_harnesses, methods=["GET"]),  # huggingface_hub's
        Route("/v1/telemetry", housekeeping.telemetry, methods=["POST"]),  # hf_xet's, at its host's root
        *([serve.metrics.route()] if serve.settings.metrics else []),
        *writes,
        HubRoute("/api/{repo_type:hub_api_type}", serve.guarded(serve.reads.list_models), methods=ANY),
        *api,
        HubRoute("/api/{repo_type:hub_api_type}/{rest:hub_rest}", serve.guarded(serve.no_route), methods=ANY),
        *xet,  # its own grants: hf_xet sends no read token
        HubRoute("/xet/{rest:hub_rest}", serve.guarded(serve.no_route, needs_token=False), methods=ANY),
        *files,
        *serve.web.routes(),  # the web pages, at the Hub's web paths: no API route is shadowed
        *serve.history_pages.routes(),
        # the rest: not found once the token is checked; other methods: 405
        Route("/{rest:path}", serve.not_found, methods=list(ANY)),
    ]


def create_app(catalog: Catalog | CatalogFor, lists: FileLists, blobs: Blobs, settings: ServeSettings | None = None, *,
               ranges: ChunkRanges | None = None, limits: Limits | None = None, publish: Publishing | None = None,
               staging: Staging | None = None, diff: Diff | None = None) -> Starlette:
    """The Starlette application over ``catalog``, behind :class:`.guard.Guard` (``limits``:
    body size, send timeout); ``settings``: serve's flags, as every route reads them;
    ``ranges``: ranges of blobs the model cache lacks from verified chunks (else the whole blob
    is fetched first). ``app.state.serve`` is the :class:`ServeApp`; the app's lifespan closes it
    at shutdown (a server that runs none, or an app it is mounted in, calls
    ``app.state.serve.close()``). ``publish``: how the write API (:mod:`.writeroutes.commit`) writes
    commits (:class:`ocibridge.hubserver.repo.publishing.Publishing`; None: writes refused); ``staging``: where
    uploads wait for their commit (default: serve's cache); ``diff``: ``ocibridge.diff``, which
    the compare pages show (:mod:`.web.compare`; None: they say there is none)."""
    serve = ServeApp(catalog, lists, blobs, settings or ServeSettings(), ranges=ranges, publish=publish,
                     staging=staging, diff=diff)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            with serve.staging.sweeping():  # abandoned uploads go on a timer
                yield
        finally:
            serve.close()

    def serve_knows(token: str) -> bool:  # a token of the token file (an open server knows none)
        return find(serve.gate.grants, token) is not None

    app = Starlette(routes=route_table(serve), lifespan=lifespan,
                    middleware=[Middleware(RequestId),
                                *([Middleware(serve.metrics.middleware)] if serve.settings.metrics else []),
                                Middleware(TrustedForwarded, trusted=serve.settings.trust_forwarded),
                                Middleware(Guard, limits=limits or Limits()),
                                *([Middleware(StaleWarning), Middleware(FetchClient, known=serve_knows)]
                                  if serve.catalog.upstream is not None else [])])
    app.router.redirect_slashes = False  # a trailing "/" is dropped by the routes themselves
    app.state.serve = serve
    return app
