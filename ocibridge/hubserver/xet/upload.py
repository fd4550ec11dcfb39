"""Uploads to serve over Xet: what ``hf_xet`` sends when huggingface_hub publishes.

    GET  /api/models/REPO/xet-write-token/{rev}     a write grant: casUrl, accessToken, exp
    POST {cas}/v1/xorbs/default/{hash}              a xorb: kept once its hash is recomputed
    POST {cas}/v1/shards, {cas}/v2/shards           a shard: its files rebuilt into Staging
    GET  {cas}/v1/chunks/default/{hash}             global dedupe: a shard naming the repository's
                                                    xorbs that hold it (:mod:`.dedupe`), or 404

``{cas}`` is ``/xet-write/REPO``. Nothing a client says is trusted: a xorb is kept (in
``xorbs/`` of the staging root, within :data:`XORB_BUDGET`) only once every chunk is
decompressed and hashed and the tree of those hashes is the hash it was sent under; a shard's
files are rebuilt from kept xorbs only, each checked against the Xet hash the shard names and
the SHA-256 of its metadata extension, and all of them are (:meth:`.staging.Staging.commit_file`)
before any is kept. A refused upload keeps nothing. At most :data:`RECEIVING_AT_ONCE` xorb
bodies are read at once (:data:`RECEIVING_SHARE` of one writer's), each checked as it arrives
(:mod:`.xorbcheck`): serve's memory stays the same whatever number of uploads hf_xet opens.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from array import array
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.core.capacity import cpu_workers
from ocibridge.core.preallocate import take_blocks
from ocibridge.errors import DigestMismatch
from ocibridge.hubserver.answers import error, requested_repo
from ocibridge.hubserver.guard import BODY_LIMIT, BODY_READ, DIVERT, Divert, Shares
from ocibridge.hubserver.quotas import UNLIMITED, QuotaCheck
from ocibridge.hubserver.signedchecks import require_token
from ocibridge.hubserver.signer import Signer
from ocibridge.hubserver.uploads.mounts import Mounts
from ocibridge.hubserver.uploads.staging import Staging, StagingFull
from ocibridge.hubserver.xet import merkle, shards
from ocibridge.hubserver.xet.ahead import Ahead
from ocibridge.hubserver.xet.announced import Announced
from ocibridge.hubserver.xet.chunklist import ChunkList
from ocibridge.hubserver.xet.dedupe import Dedupe
from ocibridge.hubserver.xet.diverted import DivertedBody, TooLarge
from ocibridge.hubserver.xet.owners import XorbOwners
from ocibridge.hubserver.xet.permits import ReadPermit
from ocibridge.hubserver.xet.rebuild import Rebuilder
from ocibridge.hubserver.xet.shards import BadUpload, FileEntry
from ocibridge.hubserver.xet.writegrant import write_grant
from ocibridge.hubserver.xet.xorbcheck import XorbCheck

if TYPE_CHECKING:
    from ocibridge.hubserver.uploads.relay import RelayFor
    from ocibridge.hubserver.uploads.xetassembly import IngestFor

log = logging.getLogger("ocibridge.hubserver")

#: bytes of verified xorbs kept for shards to come (the oldest go first past it)
XORB_BUDGET = 32 * 1024 ** 3
#: the largest shard taken
MAX_SHARD = 64 * 1024 * 1024
#: bytes of a xorb or shard received before they are written (a thread hop each time: one a
#: piece, up to the 256 KiB asyncio reads at once, cost the event loop more than receiving
#: them). Each upload under way holds this much, and hf_xet raises its uploads under way as an
#: upload goes on (8 to 19 over 4 GiB): at 1 MiB serve's peak RSS grew with the file's size
#:; at 256 KiB the thread hops cost ~0.5 s of CPU a GiB more; 512 KiB: 4 GiB peaked
#: at 117 MiB, as at 256 KiB
WRITE_PIECE = 512 * 1024
#: xorb bodies read at once, over every writer, and of those the most one writer's uploads hold
#: (:mod:`.permits`): each holds up to a WRITE_PIECE, and without a bound serve's peak memory grew
#: with hf_xet's uploads under way, so with the file's size. On 2 cores eight at once
#: already keep the CPU busy, so the wait costs no throughput.
RECEIVING_AT_ONCE = 16
RECEIVING_SHARE = 8
#: threads writing and checking received bodies at once, over every upload: each thread serve
#: starts keeps memory of its own (its malloc arena), and more than a few on these cores only
#: wait for each other; without a bound there was one a body being read (13 threads and +10 MiB
#: of peak RSS over a 4 GiB upload); fewer where this process has fewer CPUs (the checks are CPU work)
WRITING_AT_ONCE = 4
_T = TypeVar("_T")


class XetUpload:
    """The Xet upload routes over a :class:`Staging` (the module's docstring)."""

    def __init__(self, staging: Staging, grants: Signer, base: Callable[[Request], str], *,
                 budget: int = XORB_BUDGET, dedupe: Dedupe | None = None, blobs: Mounts | None = None,
                 relay: RelayFor | None = None, ingest: IngestFor | None = None, quotas: QuotaCheck = UNLIMITED,
                 announced: Announced | None = None):
        self.staging = staging
        self.relay = relay
        self.xorbs = staging.root / "xorbs"
        self.owners = XorbOwners(staging.root / "xorb-owners")  # whose each kept xorb is
        # files built before their shard, but for an upload its preupload announced as several
        self.ahead = Ahead(self.xorbs, staging.tmp, ingest, staging.budget, announced)
        self.dedupe = dedupe or Dedupe(self.xorbs)
        self.blobs = blobs  # a repository's files, for chunks of xorbs no longer kept
        self.rebuilder = Rebuilder(staging, self.xorbs, self.owners, self.dedupe, blobs, relay)  # a shard's files
        self.grants = grants
        self.quotas = quotas  # serve --quotas
        self.base = base
        self.budget = budget
        self._receiving: Shares | None = None  # made on the server's loop
        self._writing: anyio.CapacityLimiter | None = None  # the same
        self._writers: ThreadPoolExecutor | None = None  # the same bound, for bodies diverted (diverted.py)
        self._permits: set[ReadPermit] = set()  # of the xorb uploads under way

    async def run(self, call: Callable[..., _T], *args: Any) -> _T:
        return await anyio.to_thread.run_sync(call, *args)

    async def _written(self, out: BinaryIO, pieces: list[bytes], check: XorbCheck | None) -> None:
        """Write (and check) ``pieces`` on one of at most :data:`WRITING_AT_ONCE` threads."""
        if self._writing is None:
            self._writing = anyio.CapacityLimiter(cpu_workers(WRITING_AT_ONCE))
        await anyio.to_thread.run_sync(_take, out, pieces, check, limiter=self._writing)

    def close(self) -> None:
        """The records of the shards answered written (:meth:`.Dedupe.close`), the writers ended."""
        self.dedupe.close()
        if self._writers is not None:
            self._writers.shutdown(wait=True)

    @property
    def reading(self) -> int:
        """Xorb bodies being read now: uploads holding a permit (GET /metrics)."""
        return sum(permit.held for permit in self._permits)

    # -- the grant ------------------------------------------------------------------------------
    async def token(self, request: Request) -> Response:
        """A write grant for the repository, as huggingface_hub and hf_xet read it (JSON body and
        the ``X-Xet-*`` headers)."""
        # who may write is checked before (app.py's xet_write_token: a write token of repo_id)
        cas, token, expires = write_grant(self.grants, self.base, request, requested_repo(request))
        return JSONResponse({"casUrl": cas, "accessToken": token, "exp": expires},
                            headers={"X-Xet-Cas-Url": cas, "X-Xet-Access-Token": token,
                                     "X-Xet-Token-Expiration": str(expires)})

    def _require(self, request: Request) -> str:
        """The request's Xet write token is one :meth:`token` granted for its repository; the
        client it was granted to (the writer: whose share of the staging budget it takes)."""
        return require_token(self.grants, request, f"write {requested_repo(request)}", "write")

    # -- receiving ------------------------------------------------------------------------------
    async def _receive(self, request: Request, fd: int, limit: int, check: XorbCheck | None = None,
                       permit: ReadPermit | None = None) -> int | None:
        """The body into ``fd`` (and through ``check`` as it is written), read while ``permit``
        is held; its size, or None when it is larger than ``limit``."""
        taken = 0
        pending: list[bytes] = []
        held = 0
        with os.fdopen(os.dup(fd), "wb") as out:
            if permit is not None:
                await permit.take()
            async for piece in request.stream():
                if permit is not None:
                    await permit.moved()  # a piece read after a stall waits for a permit
                taken += len(piece)
                if taken > limit:
                    return None
                pending.append(piece)
                held += len(piece)
                if held >= WRITE_PIECE:  # one thread hop a WRITE_PIECE, not one a piece
                    await self._written(out, pending, check)
                    pending, held = [], 0
            if pending:
                await self._written(out, pending, check)
        return taken

    async def _receive_diverted(self, request: Request, divert: Divert, fd: int, limit: int, check: XorbCheck,
                                permit: ReadPermit) -> int | None:
        """:meth:`_receive` with the body taken from the protocol as it is parsed (:mod:`.diverted`);
        -1 when the protocol does not divert it (read it as ASGI messages then)."""
        if self._writers is None:
            self._writers = ThreadPoolExecutor(cpu_workers(WRITING_AT_ONCE), thread_name_prefix="xorb-writer")
        with os.fdopen(os.dup(fd), "wb") as out:
            await permit.take()
            body = DivertedBody(out, check, self._writers, limit=limit, guard_limit=request.scope.get(BODY_LIMIT),
                                permit=permit, write=lambda *a: _take(*a), piece=WRITE_PIECE)  # _take: found per call
            pace = divert(body)
            if pace is None:
                return -1
            body.attach(pace)
            try:
                size = await body.taken()
            except TooLarge:
                return None
            finally:
                told = request.scope.get(BODY_READ)
                if told is not None:
                    told(body.size)
        await request.receive()  # the last message, empty: the middlewares see the body end (the guard: read whole)
        return size

    # -- xorbs ----------------------------------------------------------------------------------
    async def xorb(self, request: Request) -> Response:
        writer = self._require(request)
        await self.run(self.quotas.room, requested_repo(request))  # serve --quotas: at its limit, 403
        named = request.path_params["hash"]
        want = merkle.from_hex(named)
        if request.path_params["prefix"] != "default" or want is None:
            return error(400, None, f"not a xorb key: {request.path_params['prefix']}/{named}")
        target = self.xorbs / merkle.hex_of(want)
        repo_id = requested_repo(request)
        self.ahead.started(repo_id, want)
        if target.is_file() and self.owners.owns(want, repo_id):
            with contextlib.suppress(OSError):
                os.utime(target)
            log.info("%s: xorb held already, %s bytes offered", request.url.path,
                     request.headers.get("content-length", "?"))
            self.ahead.verified(repo_id, want, await self.run(self._chunks_of, want))
            return JSONResponse({"was_inserted": False})
        # a xorb another repository sent is taken and checked all the same: the answer says
        # nothing of what other repositories hold, and only whole bytes make it this one's
        if self._receiving is None:
            self._receiving = Shares(RECEIVING_AT_ONCE, RECEIVING_SHARE)
        with self.staging.new_file() as (path, fd):
            # its blocks taken at once (tens of microseconds, as the file's creation here):
            # written into, not allocated a page at a time; no thread hop, whose pool would grow
            take_blocks(fd, _declared(request))
            check = XorbCheck()  # as it arrives: the xorb is not read back to be checked
            permit = ReadPermit(self._receiving, writer)  # its body is read with a permit (permits.py)
            self._permits.add(permit)
            try:
                divert: Divert | None = request.scope.get(DIVERT)
                size = -1 if divert is None else await self._receive_diverted(request, divert, fd, shards.MAX_XORB,
                                                                               check, permit)
                if size == -1:
                    size = await self._receive(request, fd, shards.MAX_XORB, check, permit)
            finally:
                permit.give()
                self._permits.discard(permit)
            if size is None:
                self.ahead.verified(repo_id, want, None)
                return error(413, None, f"a xorb is at most {shards.MAX_XORB} bytes")
            log.info("%s: xorb received, %d bytes", request.url.path, size)  # what dedupe saves is read here
            problem, chunks = await self.run(check.result, want)
            if problem:
                self.ahead.verified(repo_id, want, None)
                log.warning("%s: xorb refused: %s", request.url.path, problem)
                return error(400, None, f"xorb {named}: {problem}")
            self.xorbs.mkdir(parents=True, exist_ok=True)
            path.chmod(0o444)
            os.replace(path, target)
        await self.run(self.owners.own, want, repo_id)
        self.ahead.verified(repo_id, want, chunks)
        await self.run(self.dedupe.remember_xorb, want, chunks)
        await self.run(self._within_budget, target)
        return JSONResponse({"was_inserted": True})

    def _chunks_of(self, xorb: bytes) -> ChunkList | None:
        """The chunks a kept xorb was verified with (None: no longer known)."""
        try:
            return self.dedupe.chunks_of(xorb)
        except (OSError, BadUpload):
            return None

    def _within_budget(self, keep: Path) -> None:
        """Drop the least recently used xorbs past the budget (never ``keep``)."""
        found = []
        for entry in os.scandir(self.xorbs):
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                found.append((st.st_mtime, st.st_size, Path(entry.path)))
        total = sum(size for _, size, _ in found)
        for _, size, path in sorted(found):
            if total <= self.budget:
                return
            if path != keep:
                path.unlink(missing_ok=True)
                self.owners.forget(path.name)
                total -= size

    # -- shards ---------------------------------------------------------------------------------
    async def shard(self, request: Request) -> Response:
        writer = self._require(request)
        await self.run(self.quotas.room, requested_repo(request))
        with self.staging.new_file() as (path, fd):
            size = await self._receive(request, fd, MAX_SHARD)
            if size is None:
                return error(413, None, f"a shard is at most {MAX_SHARD} bytes")
            try:
                problem = await self.run(self._stage_shard, path, requested_repo(request), writer)
            except StagingFull as e:
                return error(507, None, str(e))
        if problem:
            log.warning("%s: shard refused: %s", request.url.path, problem)
            return error(400, None, f"shard refused: {problem}")
        if request.path_params["version"] == 2:
            return Response(b'{"type":"result"}\n', media_type="application/x-ndjson")
        return JSONResponse({"result": 1})  # SyncPerformed

    def _stage_shard(self, path: Path, repo_id: str, writer: str = "") -> str | None:
        """Rebuild every file of the shard at ``path`` and stage them all, or none: why not. The
        staged files are then what ``repo_id``'s later uploads may name (:mod:`.dedupe`), each
        held for the commit of ``repo_id`` to come; :class:`StagingFull` past the budget. A file
        the registry took as its xorbs came (:mod:`.ahead`) takes no room here, so it is left
        out of the budget and of the disk's free space."""
        try:
            with open(path, "rb") as f:
                files = shards.shard_files(f)
        except BadUpload as e:
            return str(e)
        problem = _malformed(files)
        if problem:
            return problem
        unique = {(e.xet_hash, e.sha256): e for e in files}  # each built once: a shard may name one twice
        relaying = self.ahead.relaying(repo_id, files)  # sent to the registry as it was built: no room here
        declared = sum(seg.size for key, e in unique.items() if key != relaying for seg in e.segments)
        # each file built is kept as a link in a folder of its own until all are built, so no
        # file stays open: a shard names thousands of files
        self.staging.tmp.mkdir(parents=True, exist_ok=True)
        held = Path(tempfile.mkdtemp(dir=self.staging.tmp, prefix="shard-"))
        offsets: dict[bytes, array[int]] = {}  # where each chunk of a xorb starts: read once
        try:
            problem = self._no_disk_for(declared)
            if problem:
                return problem  # before the take: the build ahead waits on for the shard sent again
            with self.staging.reserve(declared, repo_id, writer), contextlib.ExitStack() as more:
                ahead = self.ahead.take(repo_id, files)  # the file built as its xorbs came, checked
                sent = ahead is not None and ahead[1].path is None  # to the registry as built: no file
                relayed = ahead[1].size if ahead is not None and sent else 0
                if relaying is not None and not (sent and ahead is not None
                                                 and (ahead[0].xet_hash, ahead[0].sha256) == relaying):
                    # not taken as sent after all: it is built here, and takes room
                    more.enter_context(self.staging.reserve(sum(seg.size for seg in unique[relaying].segments),
                                                            repo_id, writer))
                built: dict[tuple[bytes, bytes | None], tuple[Path | None, str, tuple[str, ...] | None]] = {}
                if ahead is not None:
                    entry, done = ahead
                    keep: Path | None = None
                    if done.path is not None:
                        keep = held / "ahead"
                        os.replace(done.path, keep)
                    built[entry.xet_hash, entry.sha256] = (keep, done.sha256, done.chunks)
                    log.info("%s: sha256:%s was built as its xorbs came", repo_id, done.sha256)
                for key, entry in unique.items():
                    if key in built:
                        continue
                    with self.staging.new_file() as (out, fd):
                        try:
                            sha256, chunks = self.rebuilder.rebuild(entry, fd, out, repo_id, offsets)
                        except (BadUpload, DigestMismatch) as e:
                            return f"file {merkle.hex_of(entry.xet_hash)}: {e}"
                        keep = held / str(len(built))
                        os.link(out, keep)
                    built[key] = (keep, sha256, chunks)
                for keep, sha256, chunks in built.values():  # the rebuilder hashed (and chunked) what it wrote
                    if keep is None:  # the registry holds it (Staging.commit_held)
                        self.staging.commit_held(sha256, relayed, chunks)
                    else:
                        self.staging.commit_file(keep, sha256, hashed=sha256, chunks=chunks)
                    self.staging.pin(sha256, repo_id, writer)  # repo_id's commit may name it, and gives it back
        finally:
            shutil.rmtree(held, ignore_errors=True)
        self.dedupe.record_later(repo_id, list(unique.values()))  # written after the answer
        return None

    def _no_disk_for(self, declared: int) -> str | None:
        """Why ``declared`` bytes of files cannot be rebuilt here, before a byte is: more than
        the staging disk has free (a small shard naming one xorb a million times would otherwise
        fill it)."""
        self.staging.root.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(self.staging.root).free
        if declared > free:
            return f"its files are {declared} bytes, more than the {free} bytes free where serve stages uploads"
        return None

    async def no_grant(self, request: Request) -> Response:
        """``POST {cas}/v1/xorb-grants/...``: hf_xet 1.8 asks first for a grant to upload a xorb
        straight to storage; serve has no storage apart from itself, so none (a 404 sends hf_xet
        to ``/v1/xorbs/``, where the xorb is checked)."""
        self._require(request)
        return error(404, None, "no upload grants here: POST the xorb to /v1/xorbs/")

    def _held(self, repo_id: str, sha256: str, size: int) -> bool:
        if self.blobs is None:
            return self.staging.path_for(sha256) is not None  # its bytes, to place chunks in
        return self.blobs.held(repo_id, sha256, size, self.staging)

    # -- global dedupe --------------------------------------------------------------------------
    async def chunk(self, request: Request) -> Response:
        """The shard naming the repository's kept xorbs that hold the chunk (:mod:`.dedupe`),
        or 404: the client sends the chunk."""
        self._require(request)
        chunk = merkle.from_hex(request.path_params["hash"])
        shard = None
        if chunk is not None and request.path_params["prefix"] in ("default", "default-merkledb"):
            shard = await self.run(self.dedupe.answer, requested_repo(request), chunk,
                                   partial(self._held, requested_repo(request)))
        if shard is None:
            return error(404, None, "no shard holds that chunk")
        log.info("%s: dedupe answered with a shard of %d bytes", request.url.path, len(shard))
        return Response(shard, media_type="application/octet-stream")


def _malformed(files: list[FileEntry]) -> str | None:
    """Why a shard's files cannot be what it says: a segment larger than its chunks can hold."""
    for entry in files:
        for seg in entry.segments:
            if seg.size > (seg.end - seg.first) * shards.MAX_CHUNK:
                return f"a segment declares {seg.size} bytes in {seg.end - seg.first} chunks"
    return None


def _declared(request: Request) -> int:
    """The body's length as its header declares it, when a xorb may be that long (else 0)."""
    text = request.headers.get("content-length", "")
    size = int(text) if text.isdigit() and len(text) < 12 else 0
    return size if size <= shards.MAX_XORB else 0


def _take(out: BinaryIO, pieces: list[bytes], check: XorbCheck | None) -> None:
    """Write ``pieces`` and check the chunks they complete, in one trip to a worker thread."""
    out.writelines(pieces)
    if check is not None:
        check.feed(pieces)
