"""The Hub's read API (huggingface_hub's hf_api.py, file_download.py, hf_file_system.py), over
the sources: what a repo id and a revision name, a model's files, and their bytes.

    GET  /api/models?search=&author=&limit=                 what the sources hold
    (each route also as /api/datasets/..., a dataset's: repo/reponames.py)
    GET  /api/models/REPO[/revision/{rev}][?blobs=true]     model_info
    GET  /api/models/REPO/tree/{rev}[/{path}][?recursive=]  list_repo_tree (pages: Link rel="next")
    GET  /api/models/REPO/refs                              list_repo_refs (main: the default tag)
    POST /api/models/REPO/paths-info/{rev}                  get_paths_info
    (tree and paths-info with ``expand=true``: each entry's ``lastCommit``, :mod:`.lastcommits`)
    HEAD|GET /REPO/resolve/{rev}/{path}                     hf_hub_download, HfFileSystem (Range)
    HEAD|GET /REPO/raw/{rev}/{path}                         a git-lfs file's pointer, a regular file's bytes
    GET  /api/settings/repositories                         hf repos ls (:mod:`.storage`)

A regular file (:mod:`..repo.regularfiles`) is answered as the Hub answers a file kept in git (its git blob
id the ETag), any other as one kept in git-lfs (its SHA-256, and the linked ETag and size).

A file Xet may carry is named in ``X-Xet-Hash`` (:mod:`.xet.routes`). Not-found answers carry
the Hub's ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``), so the
client raises its own errors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.access import grant_of, reads
from ocibridge.hubserver.answers import ClosingStream, byte_range, error, in_thread, int_param, requested_repo
from ocibridge.hubserver.reading import storage
from ocibridge.hubserver.reading.blobs import Blobs, TableOf
from ocibridge.hubserver.reading.fileanswer import FileAnswer, Spans, file_spans
from ocibridge.hubserver.reading.modelfacts import ModelFacts
from ocibridge.hubserver.reading.pathsbody import expand_requested, requested_paths, truthy
from ocibridge.hubserver.repo import hubjson
from ocibridge.hubserver.repo.arriving import Arriving, ArrivingFile, SaidAbove
from ocibridge.hubserver.repo.catalog import Catalog, Resolved
from ocibridge.hubserver.repo.files import FileLists, HubFile, ModelFiles, Resolver, directories
from ocibridge.hubserver.repo.lastcommits import LastCommits
from ocibridge.hubserver.repo.refsrecord import RecordUnread
from ocibridge.hubserver.repo.regularfiles import git_blob_id
from ocibridge.hubserver.repo.reponames import hub_id, type_of
from ocibridge.hubserver.repo.repostates import listed_only
from ocibridge.hubserver.repo.sources import RepoNotFound
from ocibridge.kinds.hf.repotype import MODEL

if TYPE_CHECKING:
    from ocibridge.hubserver.reading.ranges import ChunkRanges
    from ocibridge.hubserver.settings import ServeSettings
    from ocibridge.oci.models import Descriptor

#: tree entries a page with ``expand=true`` holds: the Hub's (huggingface_hub's list_repo_tree:
#: "only 50 results are returned per page (instead of 1000)")
EXPAND_PAGE = 50


class XetNames(Protocol):
    """What the read routes ask of the Xet side (:class:`.xet.routes.XetRoutes`): which files it
    names, the header that refreshes its token, the chunk table a layer is read by."""

    def offer(self, resolved: Resolved, f: HubFile) -> str | None: ...

    async def offered(self, resolved: Resolved, files: ModelFiles) -> dict[str, str]: ...

    def token_route(self, request: Request, repo_id: str, commit: str) -> str: ...

    def table_of(self, resolved: Resolved, layer: Descriptor) -> TableOf | None: ...


@dataclass(frozen=True)
class ReadRoutes:
    """The read routes, over the app's resolver (``model``), blobs and chunk tables (``ranges``:
    None, none); ``created_empty``: a repository made here holds no file yet
    (:meth:`.repo.repos.Repos.created_empty`)."""

    catalog: Catalog
    model: Resolver
    blobs: Blobs
    ranges: ChunkRanges | None
    xet: XetNames
    settings: ServeSettings
    created_empty: Callable[[str, str], bool]
    lists: FileLists  # a landed revision's files (one arriving lists its own)
    last_commits: LastCommits = field(default_factory=LastCommits)
    facts: ModelFacts = field(default_factory=ModelFacts)

    async def list_models(self, request: Request) -> Response:
        """``list_models`` and ``list_datasets``: the repositories of the route's type."""
        params = request.query_params
        repo_type = str(request.path_params.get("repo_type", MODEL))
        search = (params.get("search") or "").lower()
        author = params.get("author")
        limit = int_param(params.get("limit"))
        # list_models(gated=True/False): gated ones only, or ungated ones only
        gated = {"true": True, "false": False}.get((params.get("gated") or "").lower())
        # the repositories this token reads (access.py): no other is listed, nor one whose record
        # was not read (states.py: whether it is private is not known)
        visible = listed_only(reads(request))
        states = self.catalog.states

        def chosen() -> list[dict[str, Any]]:
            """Up to ``limit`` listed repositories (each one's refs record asked: deleted, private, gated)."""
            found: list[dict[str, Any]] = []
            for r, _ in self.catalog.repo_ids():
                if limit is not None and len(found) >= limit:
                    break
                shown = hub_id(r)  # searched by the id the Hub shows, among repositories of the route's type
                if type_of(r) != repo_type or search not in shown.lower() \
                        or (author is not None and (shown.split("/", 1)[0] != author or "/" not in shown)) \
                        or not visible(r):
                    continue
                try:
                    record = states.of(r)
                except RecordUnread:  # private, gated, deleted: not known, so not listed
                    continue
                if not record.deleted and (gated is None or bool(record.gated) == gated):
                    found.append(hubjson.summary(r, record.private, record.gated))
            return found

        return self._paged(request, await in_thread(chosen))

    async def current(self, repo_id: str, revision: str | None) -> tuple[Resolved, ModelFiles] | Arriving:
        """The revision landed (its manifest and files), or arriving (a fetch under way): the
        catalog's one resolution, whichever source answers it."""
        got = await in_thread(partial(self.catalog.resolve, repo_id, revision, arriving=True))
        return got if not isinstance(got, Resolved) else (got, await in_thread(self.lists.of, got))

    async def model_info(self, request: Request) -> Response:
        blobs = request.query_params.get("blobs", "").lower() in ("1", "true")
        got = await self.current(requested_repo(request), request.path_params.get("revision"))
        if not isinstance(got, tuple):
            return said_above(await in_thread(got.model_info, blobs))
        resolved, files = got
        record = await in_thread(self.catalog.states.of, resolved.repo_id)
        facts = await self.facts.of(resolved, files, lambda f: self._small(resolved, f))
        return JSONResponse(hubjson.model_info(resolved, files, blobs, record.private, record.gated, facts))

    async def repositories(self, request: Request) -> Response:
        """``hf repos ls``: a namespace's repositories and their storage (:mod:`.storage`); the
        token's own namespace, or the organization the path names."""
        grant = grant_of(request)
        namespace = request.path_params.get("namespace") or (grant.name if grant is not None else "")
        if not namespace:
            return error(401, None, "listing your repositories needs a token: 'Authorization: Bearer TOKEN'")
        visible = listed_only(reads(request))  # one whose refs record was not read: left out
        states = self.catalog.states

        def candidates() -> list[tuple[str, bool]]:
            found = []
            for repo_id, _ in self.catalog.repo_ids():
                if storage.under(namespace, repo_id) and visible(repo_id):
                    try:
                        record = states.of(repo_id)
                    except RecordUnread:
                        continue  # its record not read: left out, never listed on a guess (states.py)
                    if not (record.deleted or record.moved):
                        found.append((repo_id, record.private))
            return found

        rows = []
        for repo_id, private in await in_thread(candidates):
            try:
                main: tuple[Resolved, ModelFiles] | None = await self.model(repo_id, None)
            except OcibridgeError:
                main = None  # created, no commit yet: nothing stored
            rows.append(storage.storage_row(repo_id, private, main))
        return self._paged(request, storage.with_shares(rows))

    async def refs(self, request: Request) -> Response:
        found = await in_thread(self.catalog.refs, requested_repo(request))
        return JSONResponse(hubjson.refs(found))

    async def tree(self, request: Request) -> Response:
        repo, revision = requested_repo(request), request.path_params["revision"]
        path = request.path_params.get("path", "")
        recursive = request.query_params.get("recursive", "").lower() in ("1", "true")
        got = await self.current(repo, revision)
        if not isinstance(got, tuple):
            return await self._arriving_tree(request, got, path, recursive)
        resolved, files = got
        offered = await self.xet.offered(resolved, files)
        entries = hubjson.tree(files, path.strip("/"), recursive, lambda f: offered.get(f.path))
        if entries is None:
            return error(404, "EntryNotFound", f"{repo}@{revision}: no directory {path}",
                          {"X-Repo-Commit": resolved.commit})
        expand = truthy(request.query_params.get("expand"))
        if expand:
            await self._with_last_commits(resolved, files, entries)
        return self._paged(request, entries, {"X-Repo-Commit": resolved.commit},
                           min(self.settings.page, EXPAND_PAGE) if expand else None)

    async def _arriving_tree(self, request: Request, arriving: Arriving, path: str, recursive: bool) -> Response:
        """A tree page of a revision arriving: a directory its files lie in (else the landed
        answer's 404), as the source lists it; the next page serve's own link."""
        files = await in_thread(arriving.files)
        if files is None:  # no listing to decide by: answered once landed
            await in_thread(arriving.landed)
            return await self.tree(request)
        wanted = path.strip("/")
        if wanted and wanted not in directories(files):
            return error(404, "EntryNotFound", f"{arriving.repo_id}@{request.path_params['revision']}: "
                                               f"no directory {path}", {"X-Repo-Commit": arriving.commit})
        expand = truthy(request.query_params.get("expand"))
        said = await in_thread(arriving.tree, wanted, recursive, expand, request.query_params.get("cursor"))
        link = None if said.cursor is None else f'<{request.url.include_query_params(cursor=said.cursor)}>; rel="next"'
        return said_above(said, {"Link": link} if link else None)

    async def _with_last_commits(self, resolved: Resolved, files: ModelFiles, entries: list[dict[str, Any]]) -> None:
        """Each entry's ``lastCommit`` (``securityFileStatus`` left out: serve scans nothing)."""
        last = await in_thread(self.last_commits.of, resolved, files)
        for entry in entries:
            if entry["path"] in last:
                entry["lastCommit"] = last[entry["path"]]

    def _paged(self, request: Request, entries: list[dict[str, Any]],
               headers: dict[str, str] | None = None, size: int | None = None) -> Response:
        size = size or self.settings.page
        start = int_param(request.query_params.get("cursor")) or 0
        page = entries[start:start + size]
        headers = dict(headers or {})
        if start + size < len(entries):
            url = request.url.include_query_params(cursor=start + size)
            headers["Link"] = f'<{url}>; rel="next"'
        return JSONResponse(page, headers=headers)

    async def paths_info(self, request: Request) -> Response:
        # the token (guarded) and the repository and revision are checked before the body is
        # read; the body is bounded by the guard (its size) and here (the paths it lists)
        resolved, files = await self.model(requested_repo(request), request.path_params["revision"])
        content_type, body = request.headers.get("content-type", ""), await request.body()
        paths = requested_paths(content_type, body)
        if isinstance(paths, str):
            return error(400, None, paths)
        offered = await self.xet.offered(resolved, files)
        entries = hubjson.paths_info(files, paths, lambda f: offered.get(f.path))
        if expand_requested(content_type, body):
            await self._with_last_commits(resolved, files, entries)
        return JSONResponse(entries, headers={"X-Repo-Commit": resolved.commit})

    async def resolve_file(self, request: Request) -> Response:
        found = await self._landed(request, await self._file_of(request))
        if isinstance(found, Response):
            return found
        resolved, f = found
        name = await in_thread(self.xet.offer, resolved, f)
        xet = {} if name is None else {"X-Xet-Hash": name, "X-Xet-Refresh-Route": self.xet.token_route(
            request, resolved.repo_id, resolved.commit)}
        return await self._landed_answer(request, resolved, f, xet)

    async def raw_file(self, request: Request) -> Response:
        """``GET /{repo}/raw/{rev}/{path}`` (huggingface.js' ``downloadFile({raw: true})``): a
        file in git-lfs as its pointer text, as the Hub's raw route answers it (the bytes are at
        resolve); a regular file as its bytes."""
        found = await self._file_of(request)
        if isinstance(found, Arrived) and found.file.git_blob is None:
            await in_thread(found.arriving.landed)  # a file in git-lfs: its pointer once landed
            found = await self._file_of(request)
        found = await self._landed(request, found)
        if isinstance(found, Response):
            return found
        resolved, f = found
        if f.git_blob is not None:
            return await self._landed_answer(request, resolved, f, {})
        text = hubjson.pointer(f)
        headers = {"X-Repo-Commit": resolved.commit, "ETag": f'"{git_blob_id(text)}"',
                   "Content-Type": "text/plain; charset=utf-8", "Content-Length": str(len(text))}
        return Response(b"" if request.method == "HEAD" else text, headers=headers)

    async def _small(self, resolved: Resolved, f: HubFile) -> bytes | None:
        """A small file's bytes, through the shared blob cache (fetched from the registry once,
        verified, and kept for the downloads that follow)."""
        if f.local is not None:
            return await in_thread(f.local.read_bytes)
        if f.layer is None:
            return None
        path = await self.blobs.fill(resolved.repo.store, resolved.model, f.layer)
        return await in_thread(path.read_bytes)

    async def _landed(self, request: Request, found: tuple[Resolved, HubFile] | Arrived | Response
                      ) -> tuple[Resolved, HubFile] | Response:
        """The file :meth:`_file_of` found, landed; else the answer due now (its refusal, or the
        answer of a file arriving)."""
        return await self._arriving_answer(request, found) if isinstance(found, Arrived) else found

    async def _file_of(self, request: Request) -> tuple[Resolved, HubFile] | Arrived | Response:
        """The revision and the file a file route names (landed, or arriving), or its 404."""
        repo, revision = requested_repo(request), request.path_params["revision"]
        path = request.path_params.get("path", "")
        try:
            got = await self.current(repo, revision)
        except RepoNotFound:
            if not self.created_empty(repo, revision):
                raise  # a repository create_repo made here holds no file yet (transformers looks for a card)
            return error(404, "EntryNotFound", f"{repo}@{revision}: no file {path} (no commit yet)")
        if not isinstance(got, tuple):
            return await self._arrived(request, got, path)
        resolved, files = got
        f = files.files.get(path.strip("/"))
        return (resolved, f) if f is not None else _no_file(request, path, resolved.commit)

    async def _arrived(self, request: Request, arriving: Arriving,
                       path: str) -> tuple[Resolved, HubFile] | Arrived | Response:
        """The file of a revision arriving a file route names (the one its listing holds), or its 404."""
        files = await in_thread(arriving.files)
        if files is None:  # no listing to decide by: answered once landed
            await in_thread(arriving.landed)
            return await self._file_of(request)
        f = files.get(path.strip("/"))
        return Arrived(arriving, f) if f is not None else _no_file(request, path, arriving.commit)

    async def _landed_answer(self, request: Request, resolved: Resolved, f: HubFile, more: dict[str, str]) -> Response:
        async def body(start: int, end: int, status: int, headers: dict[str, str]) -> Response:
            got = await self._body(resolved, f, start, end, status == 206)
            if isinstance(got, FileSpans):
                return FileAnswer(got.spans, status, headers)
            return ClosingStream(got, status_code=status, headers=headers)

        return await self._file_answer(request, resolved.commit, f.size, _named(f.size, f.git_blob, f.sha256),
                                       more, body)

    async def _arriving_answer(self, request: Request, found: Arrived) -> Response:
        f = found.file

        async def body(start: int, end: int, status: int, headers: dict[str, str]) -> Response:
            await in_thread(f.ready)  # a fetch that failed at once: its error, before any header
            return StreamingResponse(f.read(start, end), status_code=status, headers=headers)

        return await self._file_answer(request, found.arriving.commit, f.size, _named(f.size, f.git_blob, f.lfs_sha256),
                                       {}, body)

    async def _file_answer(self, request: Request, commit: str, size: int, named: dict[str, str],
                           more: dict[str, str], body: FileBody) -> Response:
        """A file's bytes (a Range of them), as resolve answers them, landed or arriving:
        the one writer of a file answer's status and headers; ``body`` the bytes'."""
        at_commit = {"X-Repo-Commit": commit}
        headers = {**at_commit, **named, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream", **more}
        wanted = byte_range(request.headers.get("range"), size)
        if wanted == "unsatisfiable":
            return error(416, None, f"range not satisfiable for {size} bytes",
                         {**at_commit, "Content-Range": f"bytes */{size}"})
        start, end = wanted if isinstance(wanted, tuple) else (0, size)
        status = 206 if isinstance(wanted, tuple) else 200
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        headers["Content-Length"] = str(end - start)
        if request.method == "HEAD":
            return Response(status_code=status, headers=headers)
        return await body(start, end, status, headers)

    async def _body(self, resolved: Resolved, f: HubFile, start: int, end: int, ranged: bool) -> Any:
        """Verified spans of a file (:class:`FileSpans`, sent by sendfile where it can), or the
        bytes of a range read by chunks (an iterator of bytes)."""
        if f.local is not None:
            return FileSpans(file_spans(f.local, start, end))
        layer = f.layer
        assert layer is not None
        partial = ranged or start or end != f.size
        # the table the manifest binds, unless the blob is kept under its digest: a cold fetch is
        # checked by it (one hash a byte), and kept, and found again, under its content key
        chunks = None if self.blobs.cached(layer) is not None else await in_thread(self.xet.table_of, resolved, layer)
        if (partial and self.ranges is not None and not self.blobs.filling(layer, chunks)
                and self.blobs.cached(layer, chunks) is None):
            # verified chunks, when the manifest binds a chunk table: no whole blob fetched for a range
            blob = await in_thread(self.ranges.open, resolved.repo.store, resolved.manifest, layer)
            if blob is not None:
                return self.ranges.read(blob, start, end)
        return FileSpans(await self.blobs.body(resolved.repo.store, resolved.model, layer, start, end, chunks))


#: a file answer's body: (start, end, status, headers) -> the response sending those bytes
FileBody = Callable[[int, int, int, dict[str, str]], Awaitable[Response]]


@dataclass(frozen=True)
class Arrived:
    """A file of a revision arriving, as a file route found it."""

    arriving: Arriving
    file: ArrivingFile


def said_above(said: SaidAbove, more: dict[str, str] | None = None) -> Response:
    """The source's answer for a revision arriving, as the route's answer."""
    return Response(said.body, status_code=said.status, headers={**said.headers, **(more or {})})


@dataclass(frozen=True)
class FileSpans:
    """A body that is spans of a verified file (what :class:`.fileanswer.FileAnswer` sends)."""

    spans: Spans


def _no_file(request: Request, path: str, commit: str) -> Response:
    """The Hub's answer for a path that is no file of the revision."""
    repo, revision = requested_repo(request), request.path_params["revision"]
    return error(404, "EntryNotFound", f"{repo}@{revision}: no file {path}", {"X-Repo-Commit": commit})


def _named(size: int, git_blob: str | None, sha256: str | None) -> dict[str, str]:
    """What names ``f`` in a resolve answer, as the Hub names it (huggingface_hub's
    ``get_hf_file_metadata`` takes ``X-Linked-Etag``, else ``ETag``, as the Hub cache's blob name):
    a regular file by its git blob id alone; a file in git-lfs by its SHA-256, with the linked
    ETag and size the Hub's redirect to its CDN carries (serve answers in place)."""
    if git_blob is not None:
        return {"ETag": f'"{git_blob}"'}
    return {"ETag": f'"{sha256}"', "X-Linked-Etag": f'"{sha256}"', "X-Linked-Size": str(size)}
