"""The Xet routes of serve (:mod:`.xorbs` for the protocol): which files are offered, the access
grant, where a file's pieces are, and the pieces, each sent only from verified bytes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.hubserver.answers import ClosingStream, bearer, byte_range, error, requested_repo
from ocibridge.hubserver.guard import Shares, turn_of
from ocibridge.hubserver.reading.blobs import Blobs, Checked, CheckedFile, TableOf
from ocibridge.hubserver.repo.catalog import Resolved
from ocibridge.hubserver.repo.files import HubFile, ModelFiles, Resolver
from ocibridge.hubserver.repo.reponames import api_path
from ocibridge.hubserver.routing import route_path
from ocibridge.hubserver.signedchecks import require_signed, require_token
from ocibridge.hubserver.signer import Signer
from ocibridge.hubserver.xet import layouts, xorbs
from ocibridge.hubserver.xet.pinned import Pinned, PinnedCommits
from ocibridge.oci.models import Descriptor
from ocibridge.stores.ranged import RangedBlobSource

if TYPE_CHECKING:
    from ocibridge.hubserver.reading.ranges import ChunkRanges

#: seconds a commit resolved for Xet requests is reused (a commit names one manifest; one file is
#: many requests); who may still read it is asked apart, at each request (:meth:`.Gate.still_reads`)
PINNED_FOR = 60
#: seconds a xorb request waits for its first verified bytes before a 503
FIRST_BYTE_WAIT = 120.0
#: bytes under which a registry blob of a commit serve made is offered before serve holds it, even
#: without a chunk table (fetched and verified long before hf_xet gives up on a silent answer)
STREAMED_MIN = 64 * 1024 * 1024
_T = TypeVar("_T")


class XetRoutes:
    """The Xet side of serve, over the app's resolver, blobs and chunk tables."""

    def __init__(self, resolve: Resolver, blobs: Blobs, ranges: ChunkRanges | None, *,
                 signer: Signer, xet_min: int | None, public_url: str | None,
                 still_reads: Callable[[str, str], None] = lambda client, repo_id: None):
        self.resolve = resolve
        self.blobs = blobs
        self.ranges = ranges
        self.xet_min = xet_min
        self.public_url = public_url.rstrip("/") if public_url else None
        self.grants = signer  # Xet access tokens and xorb URLs (:class:`.access.Gate`'s)
        # whether the client a grant names still reads the repository as it is now (:meth:`.Gate.still_reads`)
        self.still_reads = still_reads
        self._pieces: Shares | None = None  # made on the server's loop
        # commits resolved for xorb requests, with their files over Xet by content
        self.pinned = PinnedCommits(PINNED_FOR, lambda resolved, f: self.name_in(resolved, f) is not None)

    async def run(self, call: Callable[..., _T], *args: Any) -> _T:
        """``call(*args)`` on a worker thread (file and registry work keep off the event loop)."""
        return await anyio.to_thread.run_sync(call, *args)

    def name_size(self, size: int) -> bool:
        """Whether a file of ``size`` bytes is large enough for Xet (``--xet-min-size``)."""
        return self.xet_min is not None and size >= max(1, self.xet_min)

    def name(self, f: HubFile, published: bool = False) -> str | None:
        """The file's Xet name when it is large enough for Xet (``published``: a file in git-lfs of
        a commit serve made, offered whatever its size, as the Hub keeps every such file in Xet);
        none for a regular file, which the Hub keeps in git, never in Xet (:mod:`..repo.regularfiles`)."""
        if f.git_blob is not None or self.xet_min is None:
            return None
        return xorbs.file_id(f.sha256, f.size) if published or self.name_size(f.size) else None

    def name_in(self, resolved: Resolved, f: HubFile) -> str | None:
        """:meth:`name` of a file of the commit ``resolved``."""
        return self.name(f, published(resolved))

    def table_of(self, resolved: Resolved, layer: Descriptor) -> TableOf | None:
        """The chunk table the model's manifest binds for a registry ``layer``, if any (its
        fetch is then checked chunk by chunk, and Xet answers get checked chunks early)."""
        store = resolved.repo.store
        if self.ranges is None or not isinstance(store, RangedBlobSource):
            return None
        return self.ranges.layer_table(store, resolved.manifest, layer)

    def offer(self, resolved: Resolved, f: HubFile) -> str | None:
        """The Xet name a file is offered under, if it is: large enough, and its bytes can go
        out as they are verified: a verified file (a snapshot's, the model cache's), a store
        read whole at once (a layout), or a registry blob whose manifest binds a chunk table.
        A registry blob without one would be sent only once it is all fetched, and hf_xet gives
        up on an answer that sends nothing for 300 s: the plain route streams it instead."""
        name = self.name_in(resolved, f)
        if name is None or f.local is not None or f.layer is None:
            return name
        if f.size < STREAMED_MIN and published(resolved):
            return name  # a small file serve published: fetched and verified long before hf_xet gives up
        if not isinstance(resolved.repo.store, RangedBlobSource) or self.blobs.cached(f.layer) is not None:
            return name
        return name if self.table_of(resolved, f.layer) is not None else None

    async def offered(self, resolved: Resolved, files: ModelFiles) -> dict[str, str]:
        """The Xet names of the files offered over Xet (:meth:`offer`), by path."""
        if self.xet_min is None:
            return {}

        def each() -> dict[str, str]:
            names = {path: self.offer(resolved, f) for path, f in files.files.items()}
            return {path: name for path, name in names.items() if name is not None}

        return await self.run(each)

    def base(self, request: Request) -> str:
        """Where clients reach serve: ``--public-url``, else the address this request came to,
        with the path the app is mounted at (``root_path``, which ``base_url`` leaves out)."""
        if self.public_url:
            return self.public_url
        return str(request.url.replace(path=request.scope.get("root_path", ""), query="")).rstrip("/")

    def token_route(self, request: Request, repo_id: str, commit: str) -> str:
        """``X-Xet-Refresh-Route``: where huggingface_hub asks for a token for the commit."""
        return f"{self.base(request)}{api_path(repo_id)}/xet-read-token/{commit}"

    async def token(self, request: Request, repo_id: str, revision: str) -> Response:
        """A token for the revision's commit and the CAS URL naming repo and commit, as headers
        (what huggingface_hub reads) and as JSON (the Hub's body)."""
        resolved, _ = await self.resolve(repo_id, revision)
        client = self.grants.client_of(bearer(request))  # its share of the send permits
        token, expires = self.grants.grant(f"{resolved.repo_id}@{resolved.commit}", client)
        cas = f"{self.base(request)}/xet/{resolved.commit}/{resolved.repo_id}"
        return JSONResponse({"casUrl": cas, "accessToken": token, "exp": expires},
                            headers={"X-Xet-Cas-Url": cas, "X-Xet-Access-Token": token,
                                     "X-Xet-Token-Expiration": str(expires)})

    async def reconstruction(self, request: Request) -> Response:
        """``/xet/{commit}/{repo}/v1|v2/reconstructions/{file_id}``: the terms of the file of
        that Xet name (of the bytes its ``Range`` asks), each xorb at a signed URL; the Xet token
        of the repo's commit is required."""
        params = request.path_params
        repo_id, commit, name = requested_repo(request), params["commit"], params["file_id"]
        client = require_token(self.grants, request, f"{repo_id}@{commit}", "access")
        await self.run(self.still_reads, client, repo_id)  # not only when granted: private, gated, deleted
        resolved, files = await self.resolve(repo_id, commit, reuse_for=PINNED_FOR)
        f = next((f for f in files.files.values() if self.name_in(resolved, f) == name), None)
        if f is None:
            return error(404, "EntryNotFound", f"{repo_id}@{commit}: no file with the Xet name {name}")
        wanted = byte_range(request.headers.get("range"), f.size)
        if wanted == "unsatisfiable":
            return error(416, None, f"range not satisfiable for {f.size} bytes")
        start, end = wanted if isinstance(wanted, tuple) else (0, f.size)
        expires = self.grants.expiry()
        path = f"/xet/{resolved.commit}/{resolved.repo_id}/xorbs/{f.sha256}/{f.size}"
        base = self.base(request)
        layout = xorbs.ISSUED

        def url_of(k: int) -> str:
            return base + layouts.signed_url(self.grants, f"{path}/{k}", layout, expires, client)

        return JSONResponse(xorbs.reconstruction(f.sha256, f.size, layout, start, end, url_of, params["version"]))

    async def xorb(self, request: Request) -> Response:
        """``/xet/{commit}/{repo}/xorbs/{sha256}/{size}/{k}?layout=...``: the ``k``-th xorb of a
        file (its ``Range``) in the layout the URL names (:mod:`.layouts`), from verified bytes
        only; the URL's signature, over the layout too, is required (hf_xet sends no header
        here). The commit is resolved once a while (:mod:`.pinned`); who may read the repository
        is asked at every request, with the model cache's copy of the file, in one worker-thread
        call."""
        try:
            layout = layouts.parse(request.query_params.get(layouts.PARAM))
        except layouts.BadLayout as e:
            return error(400, None, f"the xorb URL's layout: {e}")
        client = require_signed(self.grants, request, layouts.signed_path(route_path(request.scope), layout),
                                "the xorb URL is not signed, or its signature expired")
        params = request.path_params
        repo_id, commit = requested_repo(request), params["commit"]
        sha256, size, k = params["sha256"], params["size"], params["k"]
        pinned = self.pinned.get(repo_id, commit)
        if pinned is None:
            await self.run(self.still_reads, client, repo_id)  # before the commit is resolved
            resolved, files = await self.resolve(repo_id, commit, reuse_for=PINNED_FOR)
            pinned = self.pinned.put(repo_id, commit, resolved, files)
        # the repository the URL was granted through, now; and the file's verified copy, if held
        f, cached = await self.run(self._held, client, repo_id, pinned, sha256, size)
        if f is None or not 0 <= k < layout.xorb_count(size):
            return error(404, "EntryNotFound", f"{repo_id}@{commit}: no such xorb")
        total = xorbs.xorb_size(size, layout, k)
        wanted = byte_range(request.headers.get("range"), total)
        if wanted == "unsatisfiable":
            return error(416, None, f"range not satisfiable for {total} bytes", {"Content-Range": f"bytes */{total}"})
        start, end = wanted if isinstance(wanted, tuple) else (0, total)
        source: Checked
        if cached is not None:
            self.blobs.hits += f.local is None
            source = CheckedFile(cached)
        else:
            assert f.layer is not None
            resolved = pinned.resolved
            chunks = pinned.tables.get(f.layer.digest)  # asked by _held
            source = await self.blobs.checked(resolved.repo.store, resolved.model, f.layer, chunks, asked=True)
            # the first piece verified before the answer starts: a blob that fails there is a 502;
            # a wait that outlasts FIRST_BYTE_WAIT is a 503 (hf_xet retries it), not a silence
            # hf_xet gives up on after 300 s
            try:
                await asyncio.wait_for(source.until(xorbs.first_piece_end(size, layout, k, start)), FIRST_BYTE_WAIT)
            except asyncio.TimeoutError:
                return error(503, None, f"{repo_id}@{commit}: still fetching that part of the file; ask again",
                             {"Retry-After": "5"})
        headers = {"Content-Length": str(end - start), "Content-Type": "application/octet-stream",
                   "Accept-Ranges": "bytes"}
        status = 200
        if isinstance(wanted, tuple):
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{total}"
        if self._pieces is None:
            self._pieces = Shares(xorbs.SENDING_AT_ONCE, xorbs.SHARE)
        body = xorbs.xorb_body(source, size, layout, k, start, end, self._pieces, client, turn_of(request.scope),
                               request.scope)
        return ClosingStream(body, status_code=status, headers=headers)

    def _held(self, client: str, repo_id: str, pinned: Pinned, sha256: str,
              size: int) -> tuple[HubFile | None, Path | None]:
        """(on a worker thread) Raise unless ``client`` may still read ``repo_id``; then the file
        of ``pinned`` offered over Xet with that content, and the verified copy the model cache
        holds of it, if any (a snapshot's file; the blob under its digest, or under the content
        key of the table the manifest binds: asked once a request, as it claims and touches it)."""
        self.still_reads(client, repo_id)
        f = pinned.by_content.get((sha256, size))
        if f is None or f.local is not None:
            return f, None if f is None else f.local
        assert f.layer is not None
        return f, self.blobs.cached(f.layer, pinned.table(f.layer, self.table_of))


def published(resolved: Resolved) -> bool:
    """Whether ``resolved`` is a commit serve made, or fetched from an upstream Hub that titled it
    (its manifest names its summary: upstream/commitfacts.py keeps the upstream's title)."""
    from ocibridge.hubserver.repo.commits import SUMMARY

    return SUMMARY in (resolved.manifest.annotations or {})
