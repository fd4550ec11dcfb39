"""LFS multipart uploads, as the Hub offers them for large files and huggingface_hub's lfs.py
(``_upload_multi_part``) sends them: the batch answer's upload action carries ``chunk_size`` and
one URL per part (keys ``00001``, ``00002``, ...) in its ``header``, and its ``href`` is where the
client POSTs the completion ``{"oid", "parts": [{"partNumber", "etag"}, ...]}`` once every part
is PUT (the ETag of each part's answer). A client resends a failed part, not the whole file.

    PUT  /ocibridge/lfs/part/{sha256}/{size}/{chunk}/{repo}/{upload}/{n}    part n (signed URL)
    POST /ocibridge/lfs/complete/{sha256}/{size}/{chunk}/{repo}/{upload}    the completion (signed URL)

Parts belong to one upload of one repository: ``{upload}`` is a random name the batch
answer gives each upload it offers, and the URLs are signed for it, its repository and its writer.
Each part is written at its place in one file of that upload's folder of the staging area
(``parts/<oid>.<key>.<writer>/data``, ``<key>`` made of the repository and the upload: no copy
when the parts are joined), so a completion, honest or not, on one repository's URL touches no
other upload's parts, and two uploads of one file to two repositories at once both land.
Each part and must be exactly its size (``chunk``, the last one the rest);
a part is done only once all its bytes came (a marker named by its number and ETag, the
SHA-256 of its bytes). The completion must name every part, each with the ETag serve gave it;
then the whole file's SHA-256 is checked against the oid before it is staged
(:meth:`.staging.Staging.commit_file`). A completion that names a missing part, or a part twice,
or another ETag, or whose bytes are not the oid is refused and every part of that upload is
removed: nothing unverified is kept. Parts no completion comes for are removed with the other
abandoned uploads (:meth:`.staging.Staging.clean`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import anyio.to_thread
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from ocibridge.core import boundedjson
from ocibridge.errors import DigestMismatch
from ocibridge.hubserver.answers import error, is_sha256, number
from ocibridge.hubserver.guard import UPLOADS
from ocibridge.hubserver.settings import ServeSettings
from ocibridge.hubserver.signedchecks import require_upload_url
from ocibridge.hubserver.signer import Signer
from ocibridge.hubserver.uploads.staging import Staging, StagingFull

log = logging.getLogger("ocibridge.hubserver")
_T = TypeVar("_T")

class Multipart:
    """The multipart routes over a :class:`Staging`, their URLs signed by ``signer``."""

    def __init__(self, staging: Staging, signer: Signer, settings: ServeSettings) -> None:
        self.staging = staging
        self.signer = signer
        self.settings = settings

    async def _run(self, call: Callable[..., _T], *args: Any) -> _T:
        return await anyio.to_thread.run_sync(call, *args)

    # -- the batch answer ----------------------------------------------------------------------
    def action(self, base: str, oid: str, size: int, repo_id: str, expires: int,
               writer: str = "") -> dict[str, Any] | None:
        """The upload action of the batch answer for a file offered in parts (None: not): a new
        upload of ``repo_id`` by ``writer``, its URLs signed for both."""
        chunk = self.settings.part_size_for(size)
        if chunk is None:
            return None
        where = f"{oid}/{size}/{chunk}/{quote(repo_id, safe='')}/{secrets.token_hex(16)}"
        header: dict[str, str] = {"chunk_size": str(chunk)}
        for n in range(1, -(-size // chunk) + 1):
            header[f"{n:05d}"] = base + self.signer.signed(f"{UPLOADS}part/{where}/{n}", expires, writer)
        return {"href": base + self.signer.signed(f"{UPLOADS}complete/{where}", expires, writer),
                "header": header, "expires_in": 3600}

    def _place(self, request: Request, *tail: str) -> tuple[str, int, int, str, Path] | Response:
        """The oid, size, part size and repository of a signed part or completion URL, and the
        folder of that upload's parts."""
        p = request.path_params
        kind = "part" if tail else "complete"
        path = "/".join((f"{UPLOADS}{kind}", p["oid"], p["size"], p["chunk"], quote(p["repo"], safe=""),
                         p["upload"], *tail))
        require_upload_url(self.signer, request, path)
        size, chunk = number(p["size"]), number(p["chunk"])
        if not is_sha256(p["oid"]) or size is None or not chunk:
            return error(400, None, f"expected {UPLOADS}{kind}/SHA256/SIZE/PART-SIZE/REPO/UPLOAD")
        writer = request.query_params.get("client", "")  # signed with the path: the upload's writer
        key = hashlib.sha256(f"{p['repo'].lower()}\0{p['upload']}".encode()).hexdigest()[:32]
        return p["oid"], size, chunk, p["repo"], self.staging.parts / f"{p['oid']}.{key}.{writer}"

    # -- a part --------------------------------------------------------------------------------
    async def put_part(self, request: Request) -> Response:
        place = self._place(request, request.path_params["n"])
        if isinstance(place, Response):
            return place
        oid, size, chunk, repo_id, where = place
        n, count = number(request.path_params["n"]) or 0, -(-size // chunk)
        if not 1 <= n <= count:
            return error(400, None, f"part {request.path_params['n']}: this upload has parts 1 to {count}")
        length = chunk if n < count else size - chunk * (count - 1)
        try:
            with self.staging.reserve(length, repo_id, request.query_params.get("client", "")):
                return await self._receive(request, where, oid, n, chunk * (n - 1), length)
        except StagingFull as e:
            return error(507, None, str(e))

    async def _receive(self, request: Request, where: Path, oid: str, n: int, at: int, length: int) -> Response:
        """Part ``n``'s bytes into their place in the upload's file (in ``where``); its ETag once all came."""
        await self._run(lambda: where.mkdir(parents=True, exist_ok=True))
        fd = await self._run(os.open, str(where / "data"), os.O_WRONLY | os.O_CREAT, 0o600)
        digest = hashlib.sha256()
        written = 0
        try:
            pending: list[bytes] = []
            async for piece in request.stream():
                if written + len(piece) > length:
                    return error(400, None, f"part {n} is larger than its {length} bytes")
                pending.append(piece)
                written += len(piece)
                if sum(map(len, pending)) >= 1 << 20:
                    await self._run(_put, fd, at + written - sum(map(len, pending)), b"".join(pending), digest)
                    pending.clear()
            await self._run(_put, fd, at + written - sum(map(len, pending)), b"".join(pending), digest)
        except ClientDisconnect:
            log.info("part %d of sha256:%s was abandoned after %d of %d bytes", n, oid, written, length)
            return error(400, None, "the client left before the part ended")
        finally:
            os.close(fd)
        if written != length:
            return error(400, None, f"part {n} is {written} bytes, not its {length}")
        etag = digest.hexdigest()
        for old in where.glob(f"{n:05d}-*"):  # a part sent again: its last bytes are the ones in place
            old.unlink(missing_ok=True)
        (where / f"{n:05d}-{etag}").touch()
        return Response(status_code=200, headers={"ETag": f'"{etag}"'})

    # -- the completion ------------------------------------------------------------------------
    async def complete(self, request: Request) -> Response:
        place = self._place(request)
        if isinstance(place, Response):
            return place
        oid, size, chunk, repo_id, where = place
        try:
            body = boundedjson.loads(await request.body(), "the body")
            parts = body["parts"]
            assert body["oid"] == oid and isinstance(parts, list)
        except (ValueError, KeyError, TypeError, AssertionError):
            return error(400, None, "expected {'oid': OID, 'parts': [{'partNumber': N, 'etag': ETAG}, ...]}")
        writer = request.query_params.get("client", "")
        problem = await self._run(self._finish, where, oid, size, chunk, parts, repo_id, writer)
        if problem:
            log.warning("multipart upload of sha256:%s refused: %s", oid, problem)
            return error(400, None, problem)
        return JSONResponse({"message": "completed"})

    def _finish(self, where: Path, oid: str, size: int, chunk: int, parts: list[Any], repo_id: str,
                writer: str) -> str | None:
        """Join the parts named (in ``where``) into the staged file ``oid`` (why not, when
        refused: then every part of this upload is removed, and no other upload's)."""
        if self.staging.pinned(oid, repo_id) and self.staging.pin(oid, repo_id, writer):  # staged already
            shutil.rmtree(where, ignore_errors=True)
            return None
        try:
            problem = _named_wrongly(where, parts, -(-size // chunk))
            if problem is None:
                data = where / "data"
                if data.stat().st_size != size:
                    problem = f"the parts hold {data.stat().st_size} bytes, not the {size} of the file"
                else:
                    try:
                        self.staging.commit_file(data, oid, tabled=True)  # its table too: the commit reads it no more
                    except DigestMismatch as e:
                        problem = str(e)
                    else:
                        self.staging.pin(oid, repo_id, writer)  # its commit gives it back
            return problem
        finally:
            shutil.rmtree(where, ignore_errors=True)


def _named_wrongly(where: Path, parts: list[Any], count: int) -> str | None:
    """Why a completion's ``parts`` are not exactly the ``count`` parts received (None: they are)."""
    if len(parts) != count:
        return f"the completion names {len(parts)} parts; this upload has {count}"
    received = {int(m.name[:5]): m.name[6:] for m in where.glob("[0-9]" * 5 + "-*")} if where.is_dir() else {}
    for n, part in enumerate(parts, 1):
        if not isinstance(part, dict) or part.get("partNumber") != n:
            return f"expected part {n} in order, got {part!r}"[:200]
        if n not in received:
            return f"part {n} was never received whole"
        if str(part.get("etag", "")).strip('"') != received[n]:
            return f"part {n}: its ETag is {received[n]}, not {part.get('etag')!r}"[:200]
    return None


def _put(fd: int, at: int, data: bytes, digest: Any) -> None:
    digest.update(data)
    view = memoryview(data)
    while view:
        done = os.pwrite(fd, view, at)
        view, at = view[done:], at + done
