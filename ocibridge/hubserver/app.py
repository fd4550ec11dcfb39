"""The ASGI application: the Hub's read API, answered from the sources.

Routes (huggingface_hub's, from its hf_api.py, file_download.py and hf_file_system.py), each a
Starlette route (:mod:`.routing`: matched on the raw path, so a revision or a path sent quoted,
``refs%2Fpr%2F1``, stays one segment), REPO being ``ORG/NAME`` or ``NAME``:

    GET  /api/models?search=&author=&limit=                 what the sources hold
    GET  /api/models/REPO[/revision/{rev}][?blobs=true]     model_info
    GET  /api/models/REPO/tree/{rev}[/{path}][?recursive=]  list_repo_tree (pages: Link rel="next")
    GET  /api/models/REPO/refs                              list_repo_refs (main: the default tag)
    POST /api/models/REPO/paths-info/{rev}                  get_paths_info
    HEAD|GET /REPO/resolve/{rev}/{path}                     hf_hub_download, HfFileSystem (Range)
    GET  /api/models/REPO/xet-read-token/{rev}              a Xet access token (hf_xet)
    GET  /xet/{commit}/REPO/v1|v2/reconstructions/{file}    where a file's pieces are (:mod:`.xet`)
    GET  /xet/{commit}/REPO/xorbs/{sha256}/{size}/{k}       the pieces (a signed URL)
    GET  /api/models/REPO/xet-write-token/{rev}             uploads over Xet (:mod:`.xetupload`),
    POST /xet-write/REPO/v1/xorbs/..., /v1|v2/shards        ... to the CAS URL it hands out
    GET  /healthz, /readyz
    GET  /, /models, /REPO, /REPO/tree/..., /REPO/blob/...  the web pages (:mod:`.web.pages`), tried last
    GET  /REPO/commits/{rev}, /REPO/compare/{a}...{b}     history and diff pages (:mod:`.web.historypages`)
    ...  the write API (create_repo, preupload, LFS batch and uploads, commit, whoami): :mod:`.publish`

A repo id of two parts is tried before one of a single part; under ``/api/models/REPO/`` the
word after REPO names the route (a path no route of that word takes is not found, never read
another way). Every other path is a 404, after the read token is checked (but under ``/xet/``,
whose routes have their own grants). Not-found answers carry the Hub's ``X-Error-Code``
(``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``), so the client raises its own errors.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qs

import anyio.to_thread
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver import XET_MIN_SIZE
from ocibridge.hubserver.access import parse_lines
from ocibridge.hubserver.answers import bearer, byte_range, error, int_param, requested_repo
from ocibridge.hubserver.guard import PATHS_MAX, Guard, Limits
from ocibridge.hubserver.reading import hubjson
from ocibridge.hubserver.reading.blobs import Blobs, read_file
from ocibridge.hubserver.reading.files import FileLists, HubFile, ModelFiles
from ocibridge.hubserver.reading.sources import Catalog, Refused, RepoNotFound, Resolved, RevisionNotFound
from ocibridge.hubserver.routing import HubRoute, route_path
from ocibridge.hubserver.uploads.staging import Staging
from ocibridge.hubserver.web.history import Compare
from ocibridge.hubserver.web.historypages import HistoryPages
from ocibridge.hubserver.web.pages import WebPages
from ocibridge.hubserver.writes.publish import UPLOAD_PATH, PublishRoutes
from ocibridge.hubserver.xet.routes import ClosingStream, XetRoutes
from ocibridge.hubserver.xet.upload import XetUpload

if TYPE_CHECKING:
    from ocibridge.hubserver.reading.ranges import ChunkRanges
    from ocibridge.hubserver.settings import PartPolicy
    from ocibridge.hubserver.web.history import Diff
    from ocibridge.hubserver.writes.commits import Publish

log = logging.getLogger("ocibridge.hubserver")

#: entries per page of a tree listing (the Hub's: 1000) and of a model listing
PAGE = 1000
_T = TypeVar("_T")
Handler = Callable[[Request], Awaitable[Response]]

#: a repo id in a route: ORG/NAME, then NAME
REPO_FORMS = ("{org:hub_part}/{name:hub_part}", "{name:hub_part}")
GET, GET_HEAD, ANY = ("GET",), ("GET", "HEAD"), ("GET", "HEAD", "POST")


class ServeApp:
    """What the routes share: the sources, the file lists, the blobs, the tokens."""

    def __init__(self, catalog: Catalog, lists: FileLists, blobs: Blobs, *,
                 tokens: Sequence[str] = (), page: int = PAGE, ranges: ChunkRanges | None = None,
                 xet_min: int | None = XET_MIN_SIZE, public_url: str | None = None,
                 publish: Publish | None = None, staging: Staging | None = None, diff: Diff | None = None,
                 parts: PartPolicy | None = None):
        self.catalog = catalog
        self.lists = lists
        self.blobs = blobs
        self.ranges = ranges
        grants = parse_lines(tokens)  # token lines: TOKEN [read|write] [REPO-PREFIX] [NAME]
        self.tokens = [g.token.encode() for g in grants]
        self.page = page
        self.xet = XetRoutes(self.model, blobs, ranges, tokens=self.tokens, xet_min=xet_min,
                             public_url=public_url)
        staging = staging or Staging()  # one staging area: an upload by either protocol, any commit
        self.publisher = PublishRoutes(catalog, lists, staging, grants, publish, public_url, parts)
        self.xet_upload = XetUpload(staging, self.xet.grants, self.xet.base,  # uploads over Xet
                                    blobs=self.publisher.mounts, relay=self.publisher.relay_for)
        self.compare = Compare(catalog, diff)  # the compare pages' diffs (ocibridge diff's), kept
        self.web = WebPages(self, public_url)  # the pages (issue 56): routed after every API route
        self.history_pages = HistoryPages(self.web, self.compare)  # its commits and compare pages

    def close(self) -> None:
        """Leave the sources and the blobs being read in chunks (the chunks verified so far
        stay in the model cache)."""
        if self.ranges is not None:
            self.ranges.close()
        self.catalog.close()

    # -- plumbing --------------------------------------------------------------------------
    async def _run(self, call: Callable[..., _T], *args: Any) -> _T:
        return await anyio.to_thread.run_sync(call, *args)

    def _allowed(self, request: Request) -> bool:
        if not self.tokens:
            return True
        given = bearer(request).encode()
        return bool(given) and any(hmac.compare_digest(given, t) for t in self.tokens)

    def guarded(self, answer: Handler, needs_token: bool = True) -> Handler:
        """``answer`` behind the read token (``needs_token``), its errors as the Hub's."""

        async def endpoint(request: Request) -> Response:
            if needs_token and not self._allowed(request):
                if not bearer(request):
                    return error(401, None, "no token was sent: this server wants 'Authorization: Bearer "
                                 "TOKEN' (huggingface_hub: HF_TOKEN or token=)")
                return error(401, None, "Invalid credentials in Authorization header")
            try:
                return await answer(request)
            except RepoNotFound as e:
                return error(404, "RepoNotFound", str(e))
            except RevisionNotFound as e:
                return error(404, "RevisionNotFound", str(e))
            except Refused as e:
                return error(403, "GatedRepo", str(e))  # the Hub's "there, not for you": every client raises it
            except OcibridgeError as e:
                log.warning("%s %s: %s", request.method, request.url.path, e)
                return error(502, None, str(e))

        return endpoint

    async def model(self, repo_id: str, revision: str | None, *,
                    reuse_for: float = 0) -> tuple[Resolved, ModelFiles]:
        """The model a revision names and its files: the one resolution both route sets make
        (``reuse_for``: :meth:`Catalog.resolve`'s)."""
        resolved = await self._run(lambda: self.catalog.resolve(repo_id, revision, reuse_for=reuse_for))
        files = await self._run(self.lists.of, resolved)
        return resolved, files

    # -- routes ------------------------------------------------------------------------------
    def routes(self) -> list[BaseRoute]:
        """Every route, in the order they are tried (the module's docstring)."""
        api: list[BaseRoute] = []
        for repo in REPO_FORMS:
            base = f"/api/models/{repo}"
            api += [
                HubRoute(f"{base}/preupload/{{revision:hub_part}}", self.guarded(self.publisher.preupload),
                         methods=("POST",)),
                HubRoute(f"{base}/commit/{{revision:hub_part}}", self.guarded(self.publisher.commit),
                         methods=("POST",)),
                HubRoute(f"{base}/commits/{{revision:hub_part}}", self.guarded(self.publisher.list_commits),
                         methods=GET),
                HubRoute(f"{base}/{{kind:hub_ref_kind}}/{{ref:hub_part}}", self.guarded(self.publisher.create_ref),
                         methods=("POST",)),
                HubRoute(f"{base}/{{kind:hub_ref_kind}}/{{ref:hub_part}}", self.guarded(self.publisher.refused),
                         methods=("DELETE",)),
                HubRoute(f"{base}/revision/{{revision:hub_rest}}", self.guarded(self.model_info), methods=GET),
                HubRoute(f"{base}/tree/{{revision:hub_part}}", self.guarded(self.tree), methods=GET),
                HubRoute(f"{base}/tree/{{revision:hub_part}}/{{path:hub_rest}}", self.guarded(self.tree),
                         methods=GET),
                HubRoute(f"{base}/paths-info/{{revision:hub_part}}", self.guarded(self.paths_info),
                         methods=("POST",)),
                HubRoute(f"{base}/refs", self.guarded(self.refs), methods=GET),
                HubRoute(f"{base}/xet-read-token/{{revision:hub_part}}", self.guarded(self.xet_token),
                         methods=GET),
                HubRoute(f"{base}/xet-write-token/{{revision:hub_part}}", self.guarded(self.xet_write_token),
                         methods=GET),
                # the word after the repo id names the route: a path none of them takes is not found
                HubRoute(f"{base}/{{verb:hub_keyword}}", self.guarded(self.no_route), methods=ANY),
                HubRoute(f"{base}/{{verb:hub_keyword}}/{{rest:hub_rest}}", self.guarded(self.no_route),
                         methods=ANY),
            ]
        api += [HubRoute(f"/api/models/{repo}", self.guarded(self.model_info), methods=GET) for repo in REPO_FORMS]
        files = [HubRoute(f"/{repo}/resolve/{{revision:hub_part}}{tail}", self.guarded(self.resolve_file),
                          methods=GET_HEAD) for repo in REPO_FORMS for tail in ("", "/{path:hub_rest}")]
        writes: list[BaseRoute] = [
            HubRoute("/api/whoami-v2", self.guarded(self.publisher.whoami, needs_token=False), methods=GET),
            HubRoute("/api/repos/create", self.guarded(self.publisher.create_repo), methods=("POST",)),
            HubRoute("/api/repos/delete", self.guarded(self.publisher.refused), methods=("DELETE",)),
            HubRoute("/api/validate-yaml", self.guarded(self.publisher.validate_yaml), methods=("POST",)),
            *[HubRoute(f"/{repo}.git/info/lfs/objects/batch", self.guarded(self.publisher.lfs_batch),
                       methods=("POST",)) for repo in REPO_FORMS],
            HubRoute(f"{UPLOAD_PATH}verify", self.guarded(self.publisher.lfs_verify), methods=("POST",)),
            # multipart (multipart.py): signed URLs, as the single PUT's
            HubRoute(f"{UPLOAD_PATH}part/{{oid:hub_part}}/{{size:hub_part}}/{{chunk:hub_part}}/{{repo:hub_part}}/"
                     "{n:hub_part}", self.guarded(self.publisher.multipart.put_part, needs_token=False),
                     methods=("PUT",)),
            HubRoute(f"{UPLOAD_PATH}complete/{{oid:hub_part}}/{{size:hub_part}}/{{chunk:hub_part}}/{{repo:hub_part}}",
                     self.guarded(self.publisher.multipart.complete, needs_token=False), methods=("POST",)),
            # no header comes with the bytes: the URL is signed (publish.py)
            HubRoute(f"{UPLOAD_PATH}{{oid:hub_part}}/{{size:hub_part}}/{{repo:hub_part}}",
                     self.guarded(self.publisher.lfs_put, needs_token=False), methods=("PUT",)),
        ]
        xet: list[BaseRoute] = []
        for repo in REPO_FORMS:
            base = f"/xet/{{commit:hub_part}}/{repo}"
            xet += [
                HubRoute(f"{base}/{{version:xet_version}}/reconstructions/{{file_id:hub_part}}",
                         self.guarded(self.xet.reconstruction, needs_token=False), methods=GET),
                HubRoute(f"{base}/xorbs/{{sha256:hub_part}}/{{size:hub_number}}/{{k:hub_number}}",
                         self.guarded(self.xet.xorb, needs_token=False), methods=GET),
            ]
        for repo in REPO_FORMS:  # uploads over Xet (:mod:`.xetupload`): their own grants, as reads
            cas, up = f"/xet-write/{repo}", self.xet_upload
            xet += [HubRoute(f"{cas}/v1/xorbs/{{prefix:hub_part}}/{{hash:hub_part}}",
                             self.guarded(up.xorb, needs_token=False), methods=("POST",)),
                    HubRoute(f"{cas}/v1/xorb-grants/{{rest:hub_rest}}", self.guarded(up.no_grant, needs_token=False),
                             methods=("POST",)),
                    HubRoute(f"{cas}/{{version:xet_version}}/shards", self.guarded(up.shard, needs_token=False),
                             methods=("POST",)),
                    HubRoute(f"{cas}/v1/chunks/{{prefix:hub_part}}/{{hash:hub_part}}",
                             self.guarded(up.chunk, needs_token=False), methods=GET)]
        return [
            Route("/healthz", self.healthz, methods=["GET", "HEAD"]),
            Route("/readyz", self.readyz, methods=["GET", "HEAD"]),
            *writes,
            HubRoute("/api/models", self.guarded(self.list_models), methods=ANY),
            *api,
            HubRoute("/api/models/{rest:hub_rest}", self.guarded(self.no_route), methods=ANY),
            *xet,  # its own grants: hf_xet sends no read token
            HubRoute("/xet/{rest:hub_rest}", self.guarded(self.no_route, needs_token=False), methods=ANY),
            *files,
            *self.web.routes(),  # the web pages, at the Hub's web paths: no API route is shadowed
            *self.history_pages.routes(),
            # the rest: not found once the token is checked; other methods: 405
            Route("/{rest:path}", self.not_found, methods=list(ANY)),
        ]

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

    async def list_models(self, request: Request) -> Response:
        params = request.query_params
        search = (params.get("search") or "").lower()
        author = params.get("author")
        limit = int_param(params.get("limit"))
        found = await self._run(lambda: [r for r, _ in self.catalog.repo_ids()])
        chosen = [r for r in found if search in r.lower()
                  and (author is None or r.split("/", 1)[0] == author and "/" in r)]
        if limit is not None:
            chosen = chosen[:limit]
        return self._paged(request, [hubjson.summary(r) for r in chosen])

    async def model_info(self, request: Request) -> Response:
        resolved, files = await self.model(requested_repo(request), request.path_params.get("revision"))
        blobs = request.query_params.get("blobs", "").lower() in ("1", "true")
        return JSONResponse(hubjson.model_info(resolved, files, blobs))

    async def refs(self, request: Request) -> Response:
        found = await self._run(self.catalog.refs, requested_repo(request))
        return JSONResponse(hubjson.refs(found))

    async def tree(self, request: Request) -> Response:
        repo, revision = requested_repo(request), request.path_params["revision"]
        path = request.path_params.get("path", "")
        resolved, files = await self.model(repo, revision)
        recursive = request.query_params.get("recursive", "").lower() in ("1", "true")
        offered = await self.xet.offered(resolved, files)
        entries = hubjson.tree(files, path.strip("/"), recursive, lambda f: offered.get(f.path))
        if entries is None:
            return error(404, "EntryNotFound", f"{repo}@{revision}: no directory {path}",
                          {"X-Repo-Commit": resolved.commit})
        return self._paged(request, entries, {"X-Repo-Commit": resolved.commit})

    def _paged(self, request: Request, entries: list[dict[str, Any]],
               headers: dict[str, str] | None = None) -> Response:
        start = int_param(request.query_params.get("cursor")) or 0
        page = entries[start:start + self.page]
        headers = dict(headers or {})
        if start + self.page < len(entries):
            url = request.url.include_query_params(cursor=start + self.page)
            headers["Link"] = f'<{url}>; rel="next"'
        return JSONResponse(page, headers=headers)

    async def paths_info(self, request: Request) -> Response:
        # the token (guarded) and the repository and revision are checked before the body is
        # read; the body is bounded by the guard (its size) and here (the paths it lists)
        resolved, files = await self.model(requested_repo(request), request.path_params["revision"])
        paths = requested_paths(request.headers.get("content-type", ""), await request.body())
        if isinstance(paths, str):
            return error(400, None, paths)
        offered = await self.xet.offered(resolved, files)
        return JSONResponse(hubjson.paths_info(files, paths, lambda f: offered.get(f.path)),
                            headers={"X-Repo-Commit": resolved.commit})

    async def xet_write_token(self, request: Request) -> Response:
        """A Xet write grant, for a write token of the repository only (the LFS routes' check)."""
        allowed = self.publisher.writer(request, requested_repo(request))
        if isinstance(allowed, Response):
            return allowed
        return await self.xet_upload.token(request)

    async def xet_token(self, request: Request) -> Response:
        return await self.xet.token(request, requested_repo(request), request.path_params["revision"])

    async def resolve_file(self, request: Request) -> Response:
        repo, revision = requested_repo(request), request.path_params["revision"]
        path = request.path_params.get("path", "")
        try:
            resolved, files = await self.model(repo, revision)
        except RepoNotFound:
            if not self.publisher.created_empty(repo, revision):
                raise  # a repository create_repo made here holds no file yet (transformers looks for a card)
            return error(404, "EntryNotFound", f"{repo}@{revision}: no file {path} (no commit yet)")
        commit = {"X-Repo-Commit": resolved.commit}
        f = files.files.get(path.strip("/"))
        if f is None:
            return error(404, "EntryNotFound", f"{repo}@{revision}: no file {path}", commit)
        headers = {**commit, "ETag": f'"{f.sha256}"', "X-Linked-Etag": f'"{f.sha256}"',
                   "X-Linked-Size": str(f.size), "Accept-Ranges": "bytes",
                   "Content-Type": "application/octet-stream"}
        name = await self._run(self.xet.offer, resolved, f) if self.xet.name_size(f.size) else None
        if name is not None:
            headers["X-Xet-Hash"] = name
            headers["X-Xet-Refresh-Route"] = self.xet.token_route(request, repo, resolved.commit)
        wanted = byte_range(request.headers.get("range"), f.size)
        if wanted == "unsatisfiable":
            return error(416, None, f"range not satisfiable for {f.size} bytes",
                          {**commit, "Content-Range": f"bytes */{f.size}"})
        start, end = wanted if isinstance(wanted, tuple) else (0, f.size)
        status = 206 if isinstance(wanted, tuple) else 200
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{f.size}"
        headers["Content-Length"] = str(end - start)
        if request.method == "HEAD":
            return Response(status_code=status, headers=headers)
        return ClosingStream(await self._body(resolved, f, start, end, status == 206),
                                 status_code=status, headers=headers)

    async def _body(self, resolved: Resolved, f: HubFile, start: int, end: int, ranged: bool) -> Any:
        if f.local is not None:
            return read_file(f.local, start, end)
        layer = f.layer
        assert layer is not None
        partial = ranged or start or end != f.size
        if partial and self.ranges is not None and not self.blobs.filling(layer) and self.blobs.cached(layer) is None:
            # verified chunks, when the manifest binds a chunk table: no whole blob fetched for a range
            blob = await self._run(self.ranges.open, resolved.repo.store, resolved.manifest, layer)
            if blob is not None:
                return self.ranges.read(blob, start, end)
        chunks = await self._run(self.xet.table_of, resolved, layer) if self.xet.name_size(layer.size) else None
        return await self.blobs.body(resolved.repo.store, resolved.model, layer, start, end, chunks)


def requested_paths(content_type: str, body: bytes) -> list[str] | str:
    """The paths a paths-info body lists (JSON ``{"paths": [...]}`` or a form's ``paths=``),
    at most :data:`.guard.PATHS_MAX` of them; else why the body is refused."""
    too_many = f"a paths-info request lists at most {PATHS_MAX} paths"
    if content_type.startswith("application/json"):
        try:
            given = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
            return "the body is not JSON"
        listed = given.get("paths", []) if isinstance(given, dict) else None
        if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
            return 'expected {"paths": ["PATH", ...]}'
        return listed if len(listed) <= PATHS_MAX else too_many
    try:  # a few fields besides the paths (expand=)
        paths = parse_qs(body.decode("utf-8", "replace"), max_num_fields=PATHS_MAX + 16).get("paths", [])
    except ValueError:
        return too_many
    return paths if len(paths) <= PATHS_MAX else too_many


def create_app(catalog: Catalog, lists: FileLists, blobs: Blobs, *, tokens: Sequence[str] = (),
               page: int = PAGE, ranges: ChunkRanges | None = None,
               xet_min: int | None = XET_MIN_SIZE, public_url: str | None = None,
               limits: Limits | None = None, publish: Publish | None = None,
               staging: Staging | None = None, diff: Diff | None = None,
               parts: PartPolicy | None = None) -> Starlette:
    """The Starlette application over ``catalog``, behind :class:`.guard.Guard` (``limits``:
    body size, send timeout); ``ranges``: ranges of blobs the model cache
    lacks from verified chunks (else the whole blob is fetched first); ``xet_min``: files from
    this size are offered over Xet (None: none); ``public_url``: the URL clients reach serve at,
    for the URLs it hands out (behind a proxy that terminates TLS). ``app.state.serve`` is the
    :class:`ServeApp`; the app's lifespan closes it at shutdown (a server that runs none, or
    an app it is mounted in, calls ``app.state.serve.close()``). ``publish``: push's code, which
    the write API (:mod:`.publish`) builds commits with (None: writes refused); ``staging``:
    where uploads wait for their commit (default: serve's cache); ``diff``: ``ocibridge.diff``,
    which the compare pages show (:mod:`.web.history`; None: they say there is none); ``parts``:
    which LFS uploads are offered in parts (:mod:`.multipart`)."""
    serve = ServeApp(catalog, lists, blobs, tokens=tokens, page=page, ranges=ranges, xet_min=xet_min,
                     public_url=public_url, publish=publish, staging=staging, diff=diff, parts=parts)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            with serve.publisher.staging.sweeping():  # abandoned uploads go on a timer
                yield
        finally:
            serve.close()

    app = Starlette(routes=serve.routes(), lifespan=lifespan,
                    middleware=[Middleware(Guard, limits=limits or Limits())])
    app.router.redirect_slashes = False  # a trailing "/" is dropped by the routes themselves
    app.state.serve = serve
    return app
