"""The pieces of an HTTP answer every route set shares: the Hub's error shape, and reading
what a request says (the repo id its route matched, a bearer token, a Range, a JSON body, a
branch, a SHA-256)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable
from typing import Any, TypeVar

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ocibridge.core import boundedjson
from ocibridge.hubserver.repo.reponames import key_of
from ocibridge.hubserver.repo.sources import RepoNotFound
from ocibridge.kinds.hf.repotype import MODEL, model_id_allowed

_T = TypeVar("_T")


async def in_thread(call: Callable[..., _T], *args: Any) -> _T:
    """``call(*args)`` on a worker thread: file and registry work keep off the event loop."""
    return await anyio.to_thread.run_sync(call, *args)


def header_text(text: str) -> str:
    """``text`` fit for a header: one line of ASCII, at most 500 characters."""
    return " ".join(text.split()).encode("ascii", "replace").decode()[:500]


def error(status: int, code: str | None, message: str, extra: dict[str, str] | None = None) -> Response:
    """An error as the Hub answers it: ``X-Error-Code`` (which the client maps to its own
    exceptions) and the message in ``X-Error-Message`` and the body."""
    headers = {"X-Error-Message": header_text(message)}
    if code:
        headers["X-Error-Code"] = code
    headers.update(extra or {})
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def requested_repo(request: Request) -> str:
    """The key (:mod:`.repo.keys`) of the repository a route matched: its type (``repo_type``,
    a model when the route names none) and ``{org}/{name}`` or ``{name}`` (app.py's
    ``REPO_FORMS``). A model id whose first part the Hub reserves (``datasets``, ``spaces``) is
    no model: :class:`RepoNotFound`, never read as the dataset its path would be."""
    params = request.path_params
    repo_id = f"{params['org']}/{params['name']}" if "org" in params else str(params["name"])
    repo_type = str(params.get("repo_type", MODEL))
    if repo_type == MODEL and not model_id_allowed(repo_id.lower().split("/")):
        raise RepoNotFound(f"{repo_id}: a model id never starts with 'datasets' or 'spaces' (the Hub keeps them)")
    return key_of(repo_type, repo_id)


def bearer(request: Request) -> str:
    """The token of ``Authorization: Bearer TOKEN``, or ""."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def number(text: str) -> int | None:
    """A text of ASCII digits (not too many: a path's ``{x:hub_number}``) as a number; None otherwise."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 20 else None


def int_param(text: str | None) -> int | None:
    try:
        return max(0, int(text)) if text is not None else None
    except ValueError:
        return None


def byte_range(header: str | None, size: int) -> tuple[int, int] | str | None:
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


_HEX64 = frozenset("0123456789abcdef")


def is_sha256(text: object) -> bool:
    """``text`` is a SHA-256 in lowercase hex (an LFS oid)."""
    return isinstance(text, str) and len(text) == 64 and set(text) <= _HEX64


def branch_of(revision: str) -> str:
    """The branch a revision names (``refs/heads/x`` is ``x``)."""
    return revision.removeprefix("refs/heads/") or "main"


#: what :func:`json_body` gives for a body that is not JSON
NOT_JSON = object()


async def json_body(request: Request) -> Any:
    """The request's JSON body, or :data:`NOT_JSON` (nested deeper than
    :data:`.boundedjson.MAX_JSON_DEPTH` too, refused before the parser recurses into it)."""
    try:
        return boundedjson.loads(await request.body(), "the body")
    except ValueError:
        return NOT_JSON


async def listed(request: Request, key: str, expected: str) -> tuple[dict[str, Any], list[Any]] | Response:
    """A JSON body and the list under ``key`` (preupload's files, a batch's objects), else the
    400 that says what was expected."""
    try:
        body = await json_body(request)
        items = body[key]
    except (KeyError, TypeError):
        return error(400, None, expected)
    if not isinstance(body, dict) or not isinstance(items, list):
        return error(400, None, expected)
    return body, items


async def released_pieces(body: AsyncGenerator[Any, None]) -> AsyncGenerator[Any, None]:
    """``body``'s pieces, each memoryview released once the server has taken it (or the answer
    ended): Starlette's answer keeps the last piece in its frame, and when an answer ends by a
    cancel (its task group cancels the send once the client's disconnect is read) the
    CancelledError's traceback keeps that frame in a reference cycle, freed only by the garbage
    collector, which the CLI runs rarely: each cold xorb answer left its last 1 MiB buffer behind
    (serve's RSS after one cold GiB over Xet: 143 MiB, 66 MiB of it such buffers). What the
    server still writes holds a view of its own, so releasing ours frees nothing it needs."""
    piece: Any = None
    try:
        async for piece in body:
            yield piece
            _release(piece)
    finally:
        _release(piece)
        await body.aclose()


def _release(piece: Any) -> None:
    if isinstance(piece, memoryview):
        with contextlib.suppress(BufferError):  # exported to a reader still using it: its view frees it
            piece.release()


class ClosingStream(StreamingResponse):
    """A streaming answer whose body is closed when the answer ends, sent or not: a client that
    leaves mid-answer gives back its send permit and file at once (Starlette leaves a body it
    stopped iterating to the garbage collector). Its pieces are released as they are taken
    (:func:`released_pieces`)."""

    body_iterator: AsyncGenerator[Any, None]

    def __init__(self, content: AsyncGenerator[Any, None], **kwargs: Any) -> None:
        super().__init__(released_pieces(content), **kwargs)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.body_iterator.aclose()
