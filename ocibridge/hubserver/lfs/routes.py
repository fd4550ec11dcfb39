"""Uploads over Git LFS (huggingface_hub's lfs.py, _commit_api.py; what ``HF_HUB_DISABLE_XET=1``
clients send): the bytes land in :class:`.Staging`, as a Xet upload's do, so a commit takes a
staged SHA-256 however it arrived.

    POST /api/models/REPO/preupload/{rev}               upload mode of each file (:mod:`.modes`), and
                                                        the oid the branch holds for it (unchanged:
                                                        skipped); shouldIgnore: by the commit's
                                                        .gitignore, else the branch's (:mod:`.gitignore`)
    POST /REPO.git/info/lfs/objects/batch               LFS batch (basic): where to PUT each object;
                                                        to a client offering "xet" (@huggingface/hub),
                                                        the Hub's Xet answer (:meth:`LfsRoutes._xet_batch`)
    PUT  /ocibridge/lfs/{sha256}/{size}/{repo}?signed   the object's bytes, into :class:`.Staging`
                                                        (a large one on to the registry as they
                                                        come instead, staged as held: .relay)
    POST /ocibridge/lfs/verify                          the object was received and verified

The batch and verify need a write token (:class:`.access.Gate`). The PUT carries no header (the
client sends none to an upload URL): its URL is signed for that object and size, for an hour;
large files are offered in parts (:mod:`.multipart`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import quote

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from ocibridge.chunks.chunking import ChunkHasher
from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE, PUSH_THRESHOLD
from ocibridge.errors import DigestMismatch
from ocibridge.hubserver.access import Grant
from ocibridge.hubserver.answers import (
    branch_of,
    error,
    in_thread,
    is_sha256,
    json_body,
    listed,
    number,
    requested_repo,
)
from ocibridge.hubserver.guard import UPLOADS
from ocibridge.hubserver.lfs import modes
from ocibridge.hubserver.lfs.gitignore import GITIGNORE, GITIGNORE_MAX, ignoring
from ocibridge.hubserver.lfs.multipart import Multipart
from ocibridge.hubserver.quotas import UNLIMITED, QuotaCheck
from ocibridge.hubserver.repo.commits import clean_path
from ocibridge.hubserver.repo.reponames import api_path
from ocibridge.hubserver.repo.repos import Repos
from ocibridge.hubserver.signedchecks import require_upload_url
from ocibridge.hubserver.uploads.relay import Handed, HandingFor, Relay
from ocibridge.hubserver.uploads.staging import Staging
from ocibridge.hubserver.uploads.uploadhash import hash_pieces, write_pieces
from ocibridge.hubserver.writeaccess import Writers

log = logging.getLogger("ocibridge.hubserver")

#: a Xet write grant for the request's client on a repository: (CAS URL, token, expiry)
XetGrant = Callable[[Request, str], tuple[str, str, int]]

#: where LFS objects are PUT (the guard lets bodies of this path be as large as they say)
UPLOAD_PATH = UPLOADS
LFS_TYPE = "application/vnd.git-lfs+json"
#: bytes of an upload written to its file at once
WRITE_PIECE = 1024 * 1024


class LfsRoutes:
    """The LFS routes, over what the write routes share; their upload URLs signed for the
    write tokens (:attr:`.access.Gate.uploads`), large files offered in parts."""

    def __init__(self, writers: Writers, repos: Repos, staging: Staging, relay_for: HandingFor,
                 relays: Callable[[str, int], bool], xet_grant: XetGrant | None = None,
                 quotas: QuotaCheck = UNLIMITED, announce: Callable[[str, list[int]], None] | None = None):
        self.writers = writers  # who may write (the write tokens)
        self.repos = repos  # what a branch holds, what is uploaded for a repository
        self.xet_grant = xet_grant  # the batch's Xet transfer, for a client that offers it (None: never)
        self.relay_for = relay_for  # a large upload on to the registry as it arrives (uploads/relay.py)
        self.relays = relays  # whether it is: then it takes no room in staging
        self.staging = staging
        self.signer = writers.gate.uploads
        self.multipart = Multipart(staging, self.signer, writers.settings)
        self.quotas = quotas  # serve --quotas
        self.announce = announce  # the sizes of the files preupload sends to LFS, so over Xet (xet/announced.py)

    async def _written_list(self, request: Request, key: str, expected: str) -> tuple[str, Grant, dict[str, Any],
                                                                                   list[Any]] | Response:
        """The repository a listing write names (preupload's files, a batch's objects), once the
        token may write it, its grant, with the JSON body and its list under ``key``; else the Hub's error."""
        repo_id = requested_repo(request)
        grant = self.writers.writer(request, repo_id)
        read = await listed(request, key, expected)
        return read if isinstance(read, Response) else (repo_id, grant, *read)

    async def preupload(self, request: Request) -> Response:
        read = await self._written_list(request, "files", "expected {'files': [{'path', 'size', 'sample'}, ...]}")
        if isinstance(read, Response):
            return read
        repo_id, _, body, asked = read
        # serve --quotas: a namespace at its limit, the Hub's 403 (past it: the batch and the commit
        # decide, by the bytes the namespace does not hold yet, which preupload does not name)
        await in_thread(self.quotas.room, repo_id)
        branch = branch_of(request.path_params["revision"])
        listing = await in_thread(self.repos.branch_listing, repo_id, branch)
        held = listing[1].files if listing is not None else {}
        rules = await in_thread(modes.branch_rules, listing)
        sent = body.get("gitIgnore")  # the .gitignore of this commit, else the branch's
        ignored = ignoring(sent if isinstance(sent, str) else
                           await in_thread(self.repos.branch_text, repo_id, branch, GITIGNORE, GITIGNORE_MAX))
        answered: list[dict[str, Any]] = []
        sizes: list[int] = []  # of each file answered
        for item in asked:
            if not isinstance(item, dict):
                return error(400, None, "expected {'files': [{'path', 'size', 'sample'}, ...]}")
            path = clean_path(item.get("path"))  # a BadCommit: 400 (failures.py)
            given = item.get("size")
            size = given if isinstance(given, int) and given >= 0 else 0
            mode, oid = modes.answer(path, size, modes.sample_of(item), rules, held.get(path))
            answer: dict[str, Any] = {"path": item["path"], "uploadMode": mode, "shouldIgnore": ignored(path)}
            if oid is not None:
                answer["oid"] = oid
            answered.append(answer)
            sizes.append(size)
        if self.announce is not None:
            self.announce(repo_id, [size for size, a in zip(sizes, answered, strict=True)
                                    if a["uploadMode"] == "lfs" and not a["shouldIgnore"]])
        return JSONResponse({"files": answered, "commitOid": None})

    async def lfs_batch(self, request: Request) -> Response:
        read = await self._written_list(request, "objects", "expected an LFS batch request")
        if isinstance(read, Response):
            return read
        repo_id, grant, body, objects = read
        writer = self.writers.writer_of(grant)  # whose share of the staging budget its uploads take
        if body.get("operation") != "upload":
            return error(400, None, "serve's LFS batch API takes uploads (downloads: the resolve API)")
        ref = body.get("ref")
        name = ref.get("name") if isinstance(ref, dict) else None
        branch = branch_of(name) if isinstance(name, str) else "main"
        held = set((await in_thread(self.repos.branch_files, repo_id, branch)).values())
        wanted = {o["oid"]: o["size"] for o in objects if isinstance(o, dict) and is_sha256(o.get("oid"))
                  and isinstance(o.get("size"), int) and o["size"] >= 0 and o["oid"] not in held}
        # serve --quotas: the objects its namespace does not hold, past its quota, are the Hub's 403
        await in_thread(self.quotas.adding_blobs, repo_id, {f"sha256:{oid}": s for oid, s in wanted.items()})
        staged = {oid for oid in wanted  # here already, and uploaded for repo_id (Staging.pinned)
                  if await in_thread(self.repos.uploaded, repo_id, oid)
                  and await in_thread(self.staging.pin, oid, repo_id, writer)}
        transfers = body.get("transfers") or ["basic"]
        in_parts = isinstance(transfers, list) and "multipart" in transfers  # huggingface_hub offers both
        over_xet = isinstance(transfers, list) and "xet" in transfers and self.xet_grant is not None
        if over_xet:  # the Hub's answer to a client offering Xet (@huggingface/hub): its xorbs and shards
            return await self._xet_batch(request, repo_id, grant, branch, objects, held | staged)
        kept = sum(s for oid, s in wanted.items() if oid not in staged and not self._relayed(repo_id, s, in_parts))
        full = await in_thread(self.staging.room_for, kept, writer)
        if full:  # git-lfs's batch API: 507, the server has no room for the objects
            await in_thread(self.staging.unpin, staged, repo_id, writer)
            return error(507, None, full)
        base = self.writers.base(request)
        author = self.writers.author(grant)
        expires = self.signer.expiry()
        answered: list[dict[str, Any]] = []
        for item in objects:
            oid, size, refused = _requested(item)
            if refused is not None:
                answered.append(refused)
                continue
            # another repository's file only when this writer could read it there (repo/mountable.py):
            # otherwise it is asked for, as a file no repository holds is
            if oid in held or oid in staged or \
                    await in_thread(self.repos.mount_home, author, repo_id, oid) is not None:  # mounted at the commit
                answered.append({"oid": oid, "size": size})  # no actions: the client skips it
                continue
            path = upload_path(str(oid), str(size), repo_id)
            upload = self.multipart.action(base, str(oid), size, repo_id, expires, writer) if in_parts else None
            answered.append({"oid": oid, "size": size, "authenticated": True, "actions": {
                "upload": upload or {"href": base + self.signer.signed(path, expires, writer), "expires_in": 3600},
                "verify": {"href": f"{base}{UPLOAD_PATH}verify", "header": {}},
            }})
        transfer = "multipart" if any("chunk_size" in a.get("actions", {}).get("upload", {}).get("header", {})
                                      for a in answered) else "basic"
        return JSONResponse({"transfer": transfer, "objects": answered, "hash_algo": "sha256"},
                            media_type=LFS_TYPE)

    async def _xet_batch(self, request: Request, repo_id: str, grant: Grant, branch: str, objects: list[Any],
                         held: set[str]) -> Response:
        """The batch answered as the Hub answers a client that offers ``xet``: ``"transfer": "xet"``,
        each object still to upload with an ``upload`` action whose ``href`` is the route that
        refreshes the Xet write token and whose headers carry the CAS URL, the token and its expiry
        (:func:`.xet.writegrant.write_grant`, what ``xet-write-token`` answers); the client then
        POSTs xorbs and shards there and commits the files by SHA-256, as huggingface_hub's Xet
        path does. Objects held already get
        no actions (the client skips them)."""
        assert self.xet_grant is not None
        cas, token, expires = self.xet_grant(request, repo_id)
        refresh = f"{self.writers.base(request)}{api_path(repo_id)}/xet-write-token/{quote(branch, safe='')}"
        author = self.writers.author(grant)
        header = {"X-Xet-Cas-Url": cas, "X-Xet-Access-Token": token, "X-Xet-Token-Expiration": str(expires)}
        answered: list[dict[str, Any]] = []
        for item in objects:
            oid, size, refused = _requested(item)
            if refused is not None:
                answered.append(refused)
            elif oid in held or await in_thread(self.repos.mount_home, author, repo_id, oid) is not None:
                answered.append({"oid": oid, "size": size})  # no actions: the client skips it
            else:
                answered.append({"oid": oid, "size": size, "authenticated": True,
                                 "actions": {"upload": {"href": refresh, "header": header}}})
        return JSONResponse({"transfer": "xet", "objects": answered, "hash_algo": "sha256"}, media_type=LFS_TYPE)

    async def lfs_put(self, request: Request) -> Response:
        params_ = request.path_params
        oid, size, repo_id = params_["oid"], number(params_["size"]), params_["repo"]
        require_upload_url(self.signer, request, upload_path(oid, params_["size"], repo_id))
        if not is_sha256(oid) or size is None:
            return error(400, None, "expected /ocibridge/lfs/SHA256/SIZE/REPO")
        writer = request.query_params.get("client", "")  # signed with the path: whose upload it is
        room = 0 if self.relays(repo_id, size) else size  # a relayed upload is not kept here
        with self.staging.reserve(room, repo_id, writer) as landed:  # StagingFull: 507 (failures.py)
            return await self._receive(request, oid, size, repo_id, writer, landed)

    def _relayed(self, repo_id: str, size: int, in_parts: bool) -> bool:
        """Whether the batch's upload of ``size`` bytes is one PUT relayed to the registry (parts
        are staged, then joined)."""
        return self.relays(repo_id, size) and not (in_parts and self.multipart.settings.part_size_for(size))

    async def _receive(self, request: Request, oid: str, size: int, repo_id: str, writer: str,
                       landed: Callable[[], None]) -> Response:
        """The bytes of one LFS PUT into staging, checked against ``oid`` (room reserved); a
        large one on to the registry instead (:meth:`_relay`)."""
        relay = self.relay_for(repo_id, oid, size)
        if relay is not None:
            return await self._relay(request, oid, size, repo_id, writer, relay)
        with self.staging.new_file() as (tmp, fd):
            # the chunk table push binds for a file this large, made from the bytes as they come
            chunks = ChunkHasher(DEFAULT_CHUNK_SIZE, threaded=False) if size >= PUSH_THRESHOLD else None
            digest = hashlib.sha256()  # of the bytes as they are written: staging need not read them again
            try:
                written = held = 0
                pending: list[bytes] = []
                async for piece in request.stream():
                    pending.append(piece)
                    written += len(piece)
                    held += len(piece)
                    if written > size:
                        return error(400, None, f"the upload is larger than the {size} bytes it was granted")
                    if held >= WRITE_PIECE:  # one thread hop a MiB, not one a read
                        await in_thread(write_pieces, fd, pending, chunks, digest)
                        pending, held = [], 0
                await in_thread(write_pieces, fd, pending, chunks, digest)
                if written != size:
                    return error(400, None, f"the upload is {written} bytes, not the {size} it was granted")
                try:
                    # the bytes hashed to the oid: their chunk table is a fact of it, kept beside it
                    await in_thread(partial(self.staging.commit_file, tmp, oid, hashed=digest.hexdigest(),
                                                 chunks=chunks.finish() if chunks is not None else None))
                except DigestMismatch as e:
                    return error(400, None, str(e))
                landed()  # the file counts now, not its reservation
                await in_thread(self.staging.pin, oid, repo_id, writer)  # its commit gives it back
            except ClientDisconnect:
                log.info("an upload of sha256:%s was abandoned after %d of %d bytes", oid, written, size)
                return error(400, None, "the client left before the upload ended")
        return Response(status_code=200)

    async def _relay(self, request: Request, oid: str, size: int, repo_id: str, writer: str,
                     relay: Relay[Handed]) -> Response:
        """The bytes of one large LFS PUT handed to the registry as they are received and hashed
        (:class:`.relay.Handed`), never written here: staged as held once the registry made the
        blob of them, which it does only after serve found they hash to ``oid``. A registry
        that fails the upload is a 502: the client sends the object again (huggingface_hub
        retries it), as no byte of it is kept here."""
        chunks = ChunkHasher(DEFAULT_CHUNK_SIZE, threaded=False) if size >= PUSH_THRESHOLD else None
        digest = hashlib.sha256()
        why_not: str | None = "the upload ended before its last byte"
        written = 0
        try:
            held = 0
            pending: list[bytes] = []
            async for piece in request.stream():
                written += len(piece)
                if written > size:
                    why_not = f"the upload is larger than the {size} bytes it was granted"
                    return error(400, None, why_not)
                pending.append(piece)
                held += len(piece)
                if held >= WRITE_PIECE:  # one thread hop a MiB, not one a read
                    await in_thread(hash_pieces, pending, chunks, digest)
                    await relay.follow.put(pending)
                    pending, held = [], 0
            await in_thread(hash_pieces, pending, chunks, digest)
            await relay.follow.put(pending)
            if written != size:
                why_not = f"the upload is {written} bytes, not the {size} it was granted"
                return error(400, None, why_not)
            hashed = digest.hexdigest()
            why_not = None if hashed == oid else f"upload: the bytes sent hash to sha256:{hashed}, not sha256:{oid}"
        except ClientDisconnect:
            log.info("an upload of sha256:%s was abandoned after %d of %d bytes", oid, written, size)
            return error(400, None, "the client left before the upload ended")
        except OSError as e:  # the registry took nothing for STALL seconds
            log.warning("%s: %s did not take the upload of sha256:%s: %s", repo_id, relay.store.describe(), oid, e)
            return error(502, None, f"{relay.store.describe()} did not take the upload of sha256:{oid} ({e}): "
                                    "send it again")
        finally:
            relay.follow.end(why_not)  # None: the registry's upload ends, its digest given; else it is cut
            await in_thread(relay.wait)
        if why_not is not None:
            return error(400, None, why_not)
        if relay.error is not None:
            why = f"{relay.store.describe()} did not take the upload of sha256:{oid} ({relay.error})"
            log.warning("%s: %s: the client is asked to send it again", repo_id, why)
            return error(502, None, f"{why}: send it again")
        await in_thread(self.staging.commit_held, oid, size, chunks.finish() if chunks is not None else None)
        await in_thread(self.staging.pin, oid, repo_id, writer)  # its commit gives it back
        return Response(status_code=200)

    async def lfs_verify(self, request: Request) -> Response:
        allowed = self.writers.writer(request, None)
        try:
            body = await json_body(request)
            oid, size = body["oid"], body["size"]
        except (KeyError, TypeError):
            return error(400, None, "expected {'oid', 'size'}")
        mine = isinstance(oid, str) and await in_thread(self.staging.pinned_by, oid, allowed.may_write)
        found = await in_thread(self.staging.size_of, oid) if mine and isinstance(oid, str) else None
        if found is None or found != size:
            return error(404, None, f"no verified upload of sha256:{oid} ({size} bytes)")
        return JSONResponse({"message": "verified"})


def upload_path(oid: str, size: str, repo_id: str) -> str:
    """Where an LFS object is PUT: its oid, size and repository (one segment), which the URL's
    signature covers."""
    return f"{UPLOAD_PATH}{oid}/{size}/{quote(repo_id, safe='')}"


def _requested(item: Any) -> tuple[str, int, dict[str, Any] | None]:
    """An object the batch asks about: its oid and size, or (for one that is no sha256 oid and
    size) the 422 entry that answers it."""
    oid, size = (item.get("oid"), item.get("size")) if isinstance(item, dict) else (None, None)
    if not is_sha256(oid) or not isinstance(size, int) or size < 0:
        return str(oid), 0, {"oid": str(oid), "size": size if isinstance(size, int) else 0,
                             "error": {"code": 422, "message": "expected a sha256 oid and a size"}}
    return str(oid), size, None
