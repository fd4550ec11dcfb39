"""The ASGI application: the Hub's read API, answered from the sources.

Routes (huggingface_hub's, from its hf_api.py, file_download.py and hf_file_system.py):

    GET  /api/models?search=&author=&limit=                 what the sources hold
    GET  /api/models/{repo}[/revision/{rev}][?blobs=true]   model_info
    GET  /api/models/{repo}/tree/{rev}[/{path}][?recursive=] list_repo_tree (pages: Link rel="next")
    POST /api/models/{repo}/paths-info/{rev}                get_paths_info
    HEAD|GET /{repo}/resolve/{rev}/{path}                   hf_hub_download, HfFileSystem (Range)
    GET  /api/models/{repo}/xet-read-token/{rev}             a Xet access token (hf_xet)
    GET  /xet/{commit}/{repo}/v1|v2/reconstructions/{file}   where a file's pieces are (:mod:`.xet`)
    GET  /xet/{commit}/{repo}/xorbs/{sha256}/{size}/{k}      the pieces (a signed URL)
    GET  /healthz, /readyz

The path is split on its raw ``/`` before decoding, so a revision or a path sent quoted
(``refs%2Fpr%2F1``) stays one segment. Not-found answers carry the Hub's ``X-Error-Code``
(``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``), so the client raises its own errors.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qs

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ocibridge.errors import OcibridgeError
from ocibridge.serve import XET_MIN_SIZE, hubjson
from ocibridge.serve.answers import bearer, byte_range, error, int_param, segments
from ocibridge.serve.blobs import Blobs, read_file
from ocibridge.serve.files import FileLists, HubFile, ModelFiles
from ocibridge.serve.sources import Catalog, Refused, RepoNotFound, Resolved, RevisionNotFound
from ocibridge.serve.xetroutes import XetRoutes

if TYPE_CHECKING:
    from ocibridge.serve.ranges import ChunkRanges

log = logging.getLogger("ocibridge.serve")

#: entries per page of a tree listing (the Hub's: 1000) and of a model listing
PAGE = 1000
_KEYWORDS = ("revision", "tree", "paths-info", "xet-read-token")
_T = TypeVar("_T")


class EntryNotFound(OcibridgeError):
    pass


class ServeApp:
    """What the routes share: the sources, the file lists, the blobs, the tokens."""

    def __init__(self, catalog: Catalog, lists: FileLists, blobs: Blobs, *,
                 tokens: Sequence[str] = (), page: int = PAGE, ranges: ChunkRanges | None = None,
                 xet_min: int | None = XET_MIN_SIZE, public_url: str | None = None):
        self.catalog = catalog
        self.lists = lists
        self.blobs = blobs
        self.ranges = ranges
        self.tokens = [t.encode() for t in tokens]
        self.page = page
        self.xet = XetRoutes(self._resolve, blobs, ranges, tokens=self.tokens, xet_min=xet_min,
                             public_url=public_url)

    # -- plumbing --------------------------------------------------------------------------
    async def _run(self, call: Callable[..., _T], *args: Any) -> _T:
        return await anyio.to_thread.run_sync(call, *args)

    def _allowed(self, request: Request) -> bool:
        if not self.tokens:
            return True
        given = bearer(request).encode()
        return bool(given) and any(hmac.compare_digest(given, t) for t in self.tokens)

    async def _guarded(self, request: Request, answer: Callable[[Request], Awaitable[Response]],
                       needs_token: bool = True) -> Response:
        if needs_token and not self._allowed(request):
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

    async def _resolve(self, repo_id: str, revision: str | None) -> tuple[Resolved, ModelFiles]:
        resolved = await self._run(self.catalog.resolve, repo_id, revision)
        files = await self._run(self.lists.of, resolved)
        return resolved, files

    # -- routes ------------------------------------------------------------------------------
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

    async def dispatch(self, request: Request) -> Response:
        if request.url.path.startswith("/xet/"):  # its own grants: hf_xet sends no read token
            return await self._guarded(request, self.xet.dispatch, needs_token=False)
        return await self._guarded(request, self._dispatch)

    async def _dispatch(self, request: Request) -> Response:
        segs = segments(request)
        if segs[:2] == ["api", "models"]:
            rest = segs[2:]
            if not rest:
                return await self.list_models(request)
            return await self._api(request, rest)
        for k in (2, 1):
            if len(segs) > k + 1 and segs[k] == "resolve" and request.method in ("GET", "HEAD"):
                return await self.resolve_file(request, "/".join(segs[:k]), segs[k + 1], "/".join(segs[k + 2:]))
        return error(404, None, f"no such route: {request.url.path}")

    async def _api(self, request: Request, rest: list[str]) -> Response:
        for k in (2, 1):
            if len(rest) > k and rest[k] in _KEYWORDS:
                repo_id, verb, args = "/".join(rest[:k]), rest[k], rest[k + 1:]
                break
        else:
            if len(rest) > 2 or request.method != "GET":
                return error(404, None, f"no such route: {request.url.path}")
            return await self.model_info(request, "/".join(rest), None)
        if verb == "revision" and len(args) >= 1 and request.method == "GET":
            return await self.model_info(request, repo_id, "/".join(args))
        if verb == "tree" and len(args) >= 1 and request.method == "GET":
            return await self.tree(request, repo_id, args[0], "/".join(args[1:]))
        if verb == "paths-info" and len(args) == 1 and request.method == "POST":
            return await self.paths_info(request, repo_id, args[0])
        if verb == "xet-read-token" and len(args) == 1 and request.method == "GET":
            return await self.xet.token(request, repo_id, args[0])
        return error(404, None, f"no such route: {request.url.path}")

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

    async def model_info(self, request: Request, repo_id: str, revision: str | None) -> Response:
        resolved, files = await self._resolve(repo_id, revision)
        blobs = request.query_params.get("blobs", "").lower() in ("1", "true")
        return JSONResponse(hubjson.model_info(resolved, files, blobs))

    async def tree(self, request: Request, repo_id: str, revision: str, path: str) -> Response:
        resolved, files = await self._resolve(repo_id, revision)
        recursive = request.query_params.get("recursive", "").lower() in ("1", "true")
        offered = await self.xet.offered(resolved, files)
        entries = hubjson.tree(files, path.strip("/"), recursive, lambda f: offered.get(f.path))
        if entries is None:
            return error(404, "EntryNotFound", f"{repo_id}@{revision}: no directory {path}",
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

    async def paths_info(self, request: Request, repo_id: str, revision: str) -> Response:
        body = await request.body()
        paths: list[str] = []
        if request.headers.get("content-type", "").startswith("application/json"):
            try:
                given = json.loads(body).get("paths", [])
            except (ValueError, AttributeError):
                given = []
            paths = [p for p in given if isinstance(p, str)] if isinstance(given, list) else []
        else:
            paths = parse_qs(body.decode("utf-8", "replace")).get("paths", [])
        resolved, files = await self._resolve(repo_id, revision)
        offered = await self.xet.offered(resolved, files)
        return JSONResponse(hubjson.paths_info(files, paths, lambda f: offered.get(f.path)),
                            headers={"X-Repo-Commit": resolved.commit})

    async def resolve_file(self, request: Request, repo_id: str, revision: str, path: str) -> Response:
        resolved, files = await self._resolve(repo_id, revision)
        commit = {"X-Repo-Commit": resolved.commit}
        f = files.files.get(path.strip("/"))
        if f is None:
            return error(404, "EntryNotFound", f"{repo_id}@{revision}: no file {path}", commit)
        headers = {**commit, "ETag": f'"{f.sha256}"', "X-Linked-Etag": f'"{f.sha256}"',
                   "X-Linked-Size": str(f.size), "Accept-Ranges": "bytes",
                   "Content-Type": "application/octet-stream"}
        name = await self._run(self.xet.offer, resolved, f) if self.xet.name_size(f.size) else None
        if name is not None:
            headers["X-Xet-Hash"] = name
            headers["X-Xet-Refresh-Route"] = self.xet.token_route(request, repo_id, resolved.commit)
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
        return StreamingResponse(await self._body(resolved, f, start, end, status == 206),
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


def create_app(catalog: Catalog, lists: FileLists, blobs: Blobs, *, tokens: Sequence[str] = (),
               page: int = PAGE, ranges: ChunkRanges | None = None,
               xet_min: int | None = XET_MIN_SIZE, public_url: str | None = None) -> Starlette:
    """The Starlette application over ``catalog``; ``ranges``: ranges of blobs the model cache
    lacks from verified chunks (else the whole blob is fetched first); ``xet_min``: files from
    this size are offered over Xet (None: none); ``public_url``: the URL clients reach serve at,
    for the URLs it hands out (behind a proxy that terminates TLS)."""
    serve = ServeApp(catalog, lists, blobs, tokens=tokens, page=page, ranges=ranges, xet_min=xet_min,
                     public_url=public_url)
    routes = [
        Route("/healthz", serve.healthz, methods=["GET", "HEAD"]),
        Route("/readyz", serve.readyz, methods=["GET", "HEAD"]),
        Route("/{rest:path}", serve.dispatch, methods=["GET", "HEAD", "POST"]),
    ]
    app = Starlette(routes=routes)
    app.state.serve = serve
    return app
