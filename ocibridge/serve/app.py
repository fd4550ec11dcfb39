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

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qs, unquote

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ocibridge.errors import OcibridgeError
from ocibridge.serve import hubjson, xet
from ocibridge.serve.blobs import Blobs, Checked, CheckedFile, read_file
from ocibridge.serve.files import FileLists, HubFile, ModelFiles
from ocibridge.serve.sources import Catalog, Refused, RepoNotFound, Resolved, RevisionNotFound
from ocibridge.stores.ranged import RangedBlobSource

if TYPE_CHECKING:
    from ocibridge.serve.ranges import ChunkRanges

log = logging.getLogger("ocibridge.serve")

#: entries per page of a tree listing (the Hub's: 1000) and of a model listing
PAGE = 1000
_KEYWORDS = ("revision", "tree", "paths-info", "xet-read-token")
#: seconds a commit resolved for Xet requests is reused (a commit names one manifest; this bounds
#: how long a deleted one or a changed policy takes to be seen)
PINNED_FOR = 60
_T = TypeVar("_T")


class EntryNotFound(OcibridgeError):
    pass


def _header_text(text: str) -> str:
    return " ".join(text.split()).encode("ascii", "replace").decode()[:500]


def _error(status: int, code: str | None, message: str, extra: dict[str, str] | None = None) -> Response:
    headers = {"X-Error-Message": _header_text(message)}
    if code:
        headers["X-Error-Code"] = code
    headers.update(extra or {})
    return JSONResponse({"error": message}, status_code=status, headers=headers)


class ServeApp:
    """What the routes share: the sources, the file lists, the blobs, the tokens."""

    def __init__(self, catalog: Catalog, lists: FileLists, blobs: Blobs, *,
                 tokens: Sequence[str] = (), page: int = PAGE, ranges: ChunkRanges | None = None,
                 xet_min: int | None = xet.MIN_SIZE, public_url: str | None = None):
        self.catalog = catalog
        self.public_url = public_url.rstrip("/") if public_url else None
        self.lists = lists
        self.blobs = blobs
        self.ranges = ranges
        self.tokens = [t.encode() for t in tokens]
        self.page = page
        self.xet_min = xet_min
        self.grants = xet.Grants(self.tokens)
        self._pinned: dict[tuple[str, str], tuple[float, Resolved, ModelFiles]] = {}
        self._pieces: asyncio.Semaphore | None = None  # made on the server's loop

    # -- plumbing --------------------------------------------------------------------------
    async def _run(self, call: Callable[..., _T], *args: Any) -> _T:
        return await anyio.to_thread.run_sync(call, *args)

    def _allowed(self, request: Request) -> bool:
        if not self.tokens:
            return True
        given = _bearer(request).encode()
        return bool(given) and any(hmac.compare_digest(given, t) for t in self.tokens)

    async def _guarded(self, request: Request, answer: Callable[[Request], Awaitable[Response]],
                       bearer: bool = True) -> Response:
        if bearer and not self._allowed(request):
            return _error(401, None, "Invalid credentials in Authorization header")
        try:
            return await answer(request)
        except RepoNotFound as e:
            return _error(404, "RepoNotFound", str(e))
        except RevisionNotFound as e:
            return _error(404, "RevisionNotFound", str(e))
        except Refused as e:
            return _error(403, "GatedRepo", str(e))  # the Hub's "there, not for you": every client raises it
        except OcibridgeError as e:
            log.warning("%s %s: %s", request.method, request.url.path, e)
            return _error(502, None, str(e))

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
            return await self._guarded(request, self._xet, bearer=False)
        return await self._guarded(request, self._dispatch)

    def _segments(self, request: Request) -> list[str]:
        raw = request.scope.get("raw_path") or request.url.path.encode()
        segs = [unquote(s.decode("latin-1")) for s in raw.split(b"?", 1)[0].split(b"/")[1:]]
        if segs and segs[-1] == "" and len(segs) > 1:
            segs = segs[:-1]
        return segs

    async def _dispatch(self, request: Request) -> Response:
        segs = self._segments(request)
        if segs[:2] == ["api", "models"]:
            rest = segs[2:]
            if not rest:
                return await self.list_models(request)
            return await self._api(request, rest)
        for k in (2, 1):
            if len(segs) > k + 1 and segs[k] == "resolve" and request.method in ("GET", "HEAD"):
                return await self.resolve_file(request, "/".join(segs[:k]), segs[k + 1], "/".join(segs[k + 2:]))
        return _error(404, None, f"no such route: {request.url.path}")

    async def _api(self, request: Request, rest: list[str]) -> Response:
        for k in (2, 1):
            if len(rest) > k and rest[k] in _KEYWORDS:
                repo_id, verb, args = "/".join(rest[:k]), rest[k], rest[k + 1:]
                break
        else:
            if len(rest) > 2 or request.method != "GET":
                return _error(404, None, f"no such route: {request.url.path}")
            return await self.model_info(request, "/".join(rest), None)
        if verb == "revision" and len(args) >= 1 and request.method == "GET":
            return await self.model_info(request, repo_id, "/".join(args))
        if verb == "tree" and len(args) >= 1 and request.method == "GET":
            return await self.tree(request, repo_id, args[0], "/".join(args[1:]))
        if verb == "paths-info" and len(args) == 1 and request.method == "POST":
            return await self.paths_info(request, repo_id, args[0])
        if verb == "xet-read-token" and len(args) == 1 and request.method == "GET":
            return await self.xet_token(request, repo_id, args[0])
        return _error(404, None, f"no such route: {request.url.path}")

    async def list_models(self, request: Request) -> Response:
        params = request.query_params
        search = (params.get("search") or "").lower()
        author = params.get("author")
        limit = _int(params.get("limit"))
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
        offered = await self._offered(resolved, files)
        entries = hubjson.tree(files, path.strip("/"), recursive, lambda f: offered.get(f.path))
        if entries is None:
            return _error(404, "EntryNotFound", f"{repo_id}@{revision}: no directory {path}",
                          {"X-Repo-Commit": resolved.commit})
        return self._paged(request, entries, {"X-Repo-Commit": resolved.commit})

    def _paged(self, request: Request, entries: list[dict[str, Any]],
               headers: dict[str, str] | None = None) -> Response:
        start = _int(request.query_params.get("cursor")) or 0
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
        offered = await self._offered(resolved, files)
        return JSONResponse(hubjson.paths_info(files, paths, lambda f: offered.get(f.path)),
                            headers={"X-Repo-Commit": resolved.commit})

    async def resolve_file(self, request: Request, repo_id: str, revision: str, path: str) -> Response:
        resolved, files = await self._resolve(repo_id, revision)
        commit = {"X-Repo-Commit": resolved.commit}
        f = files.files.get(path.strip("/"))
        if f is None:
            return _error(404, "EntryNotFound", f"{repo_id}@{revision}: no file {path}", commit)
        headers = {**commit, "ETag": f'"{f.sha256}"', "X-Linked-Etag": f'"{f.sha256}"',
                   "X-Linked-Size": str(f.size), "Accept-Ranges": "bytes",
                   "Content-Type": "application/octet-stream"}
        name = await self._run(self._offer, resolved, f) if self.xet_min is not None else None
        if name is not None:
            headers["X-Xet-Hash"] = name
            headers["X-Xet-Refresh-Route"] = self._token_route(request, repo_id, resolved.commit)
        wanted = _range(request.headers.get("range"), f.size)
        if wanted == "unsatisfiable":
            return _error(416, None, f"range not satisfiable for {f.size} bytes",
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
        return await self.blobs.body(resolved.repo.store, resolved.model, layer, start, end)


    # -- Xet (:mod:`.xet`) -----------------------------------------------------------------------
    def _xet_name(self, f: HubFile) -> str | None:
        """The file's Xet name when it is large enough for Xet (``--xet-min-size``)."""
        if self.xet_min is None or f.size < max(1, self.xet_min):
            return None
        return xet.file_id(f.sha256, f.size)

    def _offer(self, resolved: Resolved, f: HubFile) -> str | None:
        """The Xet name a file is offered under, if it is: large enough, and its bytes can go
        out as they are verified: a verified file (a snapshot's, the model cache's), a store
        read whole at once (a layout), or a registry blob whose manifest binds a chunk table.
        A registry blob without one would be sent only once it is all fetched, and hf_xet gives
        up on an answer that sends nothing for 300 s: the plain route streams it instead."""
        name = self._xet_name(f)
        if name is None or f.local is not None or f.layer is None:
            return name
        store = resolved.repo.store
        if not isinstance(store, RangedBlobSource) or self.blobs.cached(f.layer) is not None:
            return name
        if self.ranges is not None and self.ranges.layer_table(store, resolved.manifest, f.layer) is not None:
            return name
        return None

    async def _offered(self, resolved: Resolved, files: ModelFiles) -> dict[str, str]:
        """The Xet names of the files offered over Xet (:meth:`_offer`), by path."""
        if self.xet_min is None:
            return {}

        def each() -> dict[str, str]:
            names = {path: self._offer(resolved, f) for path, f in files.files.items()}
            return {path: name for path, name in names.items() if name is not None}

        return await self._run(each)

    def _base(self, request: Request) -> str:
        """Where clients reach serve: ``--public-url``, else the address this request came to."""
        return self.public_url or str(request.base_url).rstrip("/")

    def _token_route(self, request: Request, repo_id: str, commit: str) -> str:
        return f"{self._base(request)}/api/models/{repo_id}/xet-read-token/{commit}"

    async def xet_token(self, request: Request, repo_id: str, revision: str) -> Response:
        resolved, _ = await self._resolve(repo_id, revision)
        token, expires = self.grants.grant(f"{resolved.repo_id}@{resolved.commit}")
        cas = f"{self._base(request)}/xet/{resolved.commit}/{resolved.repo_id}"
        return JSONResponse({"casUrl": cas, "accessToken": token, "exp": expires},
                            headers={"X-Xet-Cas-Url": cas, "X-Xet-Access-Token": token,
                                     "X-Xet-Token-Expiration": str(expires)})

    async def _pinned_model(self, repo_id: str, commit: str) -> tuple[Resolved, ModelFiles]:
        """A commit's model for the Xet routes, reused for :data:`PINNED_FOR` seconds (one
        file is many requests)."""
        key = (repo_id, commit)
        known = self._pinned.get(key)
        if known is not None and time.monotonic() - known[0] < PINNED_FOR:
            return known[1], known[2]
        resolved, files = await self._resolve(repo_id, commit)
        if len(self._pinned) > 1024:
            self._pinned.clear()
        self._pinned[key] = (time.monotonic(), resolved, files)
        return resolved, files

    async def _xet(self, request: Request) -> Response:
        segs = self._segments(request)
        if request.method != "GET" or len(segs) < 6:
            return _error(404, None, f"no such route: {request.url.path}")
        commit = segs[1]
        if len(segs) in (6, 7) and segs[-2] == "reconstructions" and segs[-3] in ("v1", "v2"):
            return await self.xet_reconstruction(request, "/".join(segs[2:-3]), commit, int(segs[-3][1]), segs[-1])
        size, k = _number(segs[-2]), _number(segs[-1])
        if len(segs) in (7, 8) and segs[-4] == "xorbs" and size is not None and k is not None:
            return await self.xet_xorb(request, "/".join(segs[2:-4]), commit, segs[-3], size, k)
        return _error(404, None, f"no such route: {request.url.path}")

    async def xet_reconstruction(self, request: Request, repo_id: str, commit: str, version: int,
                                 name: str) -> Response:
        if not self.grants.allows(_bearer(request), f"{repo_id}@{commit}"):
            return _error(401, None, "Invalid or expired Xet access token")
        resolved, files = await self._pinned_model(repo_id, commit)
        f = next((f for f in files.files.values() if self._xet_name(f) == name), None)
        if f is None:
            return _error(404, "EntryNotFound", f"{repo_id}@{commit}: no file with the Xet name {name}")
        wanted = _range(request.headers.get("range"), f.size)
        if wanted == "unsatisfiable":
            return _error(416, None, f"range not satisfiable for {f.size} bytes")
        start, end = wanted if isinstance(wanted, tuple) else (0, f.size)
        expires = self.grants.expiry()
        path = f"/xet/{resolved.commit}/{resolved.repo_id}/xorbs/{f.sha256}/{f.size}"
        base = self._base(request)

        def url_of(k: int) -> str:
            return base + self.grants.signed(f"{path}/{k}", expires)

        return JSONResponse(xet.reconstruction(f.sha256, f.size, start, end, url_of, version))

    async def xet_xorb(self, request: Request, repo_id: str, commit: str, sha256: str, size: int,
                       k: int) -> Response:
        params = request.query_params
        if not self.grants.url_allowed(request.url.path, params.get("expires"), params.get("signature")):
            return _error(403, None, "the xorb URL is not signed, or its signature expired")
        resolved, files = await self._pinned_model(repo_id, commit)
        f = next((f for f in files.files.values() if f.sha256 == sha256 and f.size == size), None)
        if f is None or self._xet_name(f) is None or not 0 <= k < xet.xorb_count(size):
            return _error(404, "EntryNotFound", f"{repo_id}@{commit}: no such xorb")
        total = xet.xorb_size(size, k)
        wanted = _range(request.headers.get("range"), total)
        if wanted == "unsatisfiable":
            return _error(416, None, f"range not satisfiable for {total} bytes", {"Content-Range": f"bytes */{total}"})
        start, end = wanted if isinstance(wanted, tuple) else (0, total)
        source: Checked
        if f.local is not None:
            source = CheckedFile(f.local)
        else:
            assert f.layer is not None
            store = resolved.repo.store
            chunks = None
            if self.ranges is not None and self.blobs.cached(f.layer) is None:
                chunks = await self._run(self.ranges.layer_table, store, resolved.manifest, f.layer)
            source = await self.blobs.checked(store, resolved.model, f.layer, chunks)
        # the first piece verified before the answer starts: a blob that fails there is a 502
        await source.until(xet.first_piece_end(size, k, start))
        headers = {"Content-Length": str(end - start), "Content-Type": "application/octet-stream",
                   "Accept-Ranges": "bytes"}
        status = 200
        if isinstance(wanted, tuple):
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{total}"
        if self._pieces is None:
            self._pieces = asyncio.Semaphore(xet.SENDING_AT_ONCE)
        return StreamingResponse(xet.xorb_body(source, size, k, start, end, self._pieces),
                                 status_code=status, headers=headers)


def _bearer(request: Request) -> str:
    """The token of ``Authorization: Bearer TOKEN``, or ""."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _number(text: str) -> int | None:
    """A path segment of ASCII digits (not too many) as a number; None otherwise."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 20 else None


def _int(text: str | None) -> int | None:
    try:
        return max(0, int(text)) if text is not None else None
    except ValueError:
        return None


def _range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """``Range: bytes=A-B`` (B included), ``A-`` or ``-N`` as [start, end); None: the whole file
    (no header, or one this server does not take: several ranges, another unit)."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, sep, last = header[len("bytes="):].strip().partition("-")
    try:
        if not sep:
            return None
        if not first:
            n = int(last)
            return (max(0, size - n), size) if n > 0 and size > 0 else "unsatisfiable"
        start = int(first)
        end = min(int(last) + 1, size) if last else size
    except ValueError:
        return None
    if start >= size or end <= start:
        return "unsatisfiable"
    return start, end


def create_app(catalog: Catalog, lists: FileLists, blobs: Blobs, *, tokens: Sequence[str] = (),
               page: int = PAGE, ranges: ChunkRanges | None = None,
               xet_min: int | None = xet.MIN_SIZE, public_url: str | None = None) -> Starlette:
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
