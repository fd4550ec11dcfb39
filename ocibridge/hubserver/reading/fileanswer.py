"""A file's bytes as an answer's body: handed to the socket by ``sendfile(2)`` where the server
offers it (:mod:`..zerocopy`), else read and sent a piece at a time as ASGI messages.

The bytes come as spans of a file that are verified already (``(fd, offset, count)``: the
model cache's blob or a snapshot's file whole, a registry fetch's prefix as it is checked:
:func:`.follow.spans`); what is sent is never more than the spans hand out. A client that
leaves ends the answer; one that reads nothing for the guard's send timeout is dropped.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from starlette.responses import Response

from ocibridge.errors import DigestMismatch
from ocibridge.hubserver.zerocopy import ClientGone, ClientStalled, drop, send_direct

#: ``(fd, offset, count)``: verified bytes of a file, the descriptor good until the next step
Spans = AsyncGenerator[tuple[int, int, int], None]
#: bytes read and sent per ASGI message where the server takes no sendfile
PIECE = 1 << 20


async def file_spans(path: Path, start: int, end: int) -> Spans:
    """Bytes ``[start, end)`` of a verified local file, as one span."""
    fd = await anyio.to_thread.run_sync(os.open, path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if end > start:
            yield fd, start, end - start
    finally:
        os.close(fd)


class FileAnswer(Response):
    """An answer whose body is :data:`Spans` (its headers name the Content-Length)."""

    def __init__(self, spans: Spans, status_code: int, headers: dict[str, str]):
        super().__init__(None, status_code, headers)
        self.spans = spans

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        failed: Exception | None = None
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            async with anyio.create_task_group() as group:

                async def gone() -> None:  # the client left: stop sending (as Starlette's streams)
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    group.cancel_scope.cancel()

                async def body() -> None:
                    nonlocal failed
                    try:
                        await self._send_body(scope, send)
                    except (ClientGone, ClientStalled) as e:
                        await drop(scope, e)
                    except Exception as e:  # noqa: BLE001 - raised below, outside the task group
                        failed = e
                    group.cancel_scope.cancel()

                group.start_soon(gone)
                await body()
        finally:
            await self.spans.aclose()
        if failed is not None:
            raise failed  # the file's error (a fetch that failed its digest): the server cuts the connection

    async def _send_body(self, scope: Any, send: Any) -> None:
        async for fd, offset, count in self.spans:
            at, stop = offset, offset + count
            while at < stop:
                sent = await send_direct(scope, fd, [(b"", at, stop - at)])
                if sent is not None:
                    at += sent
                    continue
                # not by sendfile now (what the server holds is not sent yet, TLS, h11): a piece as a message
                data = await anyio.to_thread.run_sync(os.pread, fd, min(PIECE, stop - at), at)
                if not data:
                    raise DigestMismatch(f"the file ended at byte {at}, before its {stop}")
                at += len(data)
                await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
