"""A streamed answer lets go of its pieces when it ends (issue 91: serve's RSS after one cold GiB
over Xet was 143 MiB, 66 MiB of it the last 1 MiB piece of each xorb answer).

Starlette's streaming answer keeps the last piece in its frame; when the server reads the
client's disconnect as the answer completes (uvicorn answers ``http.disconnect`` once the last
body message is sent), Starlette's task group cancels the final send, and the CancelledError's
traceback keeps that frame in a reference cycle that only the garbage collector frees. The
``send`` here behaves as uvicorn's does at that point: the disconnect is readable once the last
message is sent, and the send then yields to the loop.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncGenerator
from typing import Any

from ocibridge.hubserver.answers import ClosingStream

PIECE = 1024 * 1024


class Piece(bytearray):
    """A buffer a weak reference can watch (a plain bytearray takes none)."""


async def _pieces(kept: list[weakref.ref[Piece]], count: int) -> AsyncGenerator[memoryview, None]:
    for _ in range(count):
        piece = Piece(PIECE)
        kept.append(weakref.ref(piece))
        yield memoryview(piece)


def _answer_ending_with_a_cancel(kept: list[weakref.ref[Piece]]) -> list[int]:
    """Stream three pieces through a ClosingStream as uvicorn would; the body sizes sent."""
    sent: list[int] = []

    async def run() -> None:
        complete = asyncio.Event()

        async def receive() -> dict[str, Any]:
            await complete.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                sent.append(len(message["body"]))
                if not message.get("more_body", False):
                    complete.set()
            await asyncio.sleep(0)

        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}}
        await ClosingStream(_pieces(kept, 3), status_code=200)(scope, receive, send)

    asyncio.run(run())
    return sent


def test_a_streamed_answers_pieces_are_freed_when_it_ends_not_by_the_garbage_collector() -> None:
    kept: list[weakref.ref[Piece]] = []
    gc.disable()
    try:
        sent = _answer_ending_with_a_cancel(kept)
        alive = [ref for ref in kept if ref() is not None]
    finally:
        gc.enable()
    assert sent == [PIECE, PIECE, PIECE, 0]
    assert len(kept) == 3
    assert alive == [], f"{len(alive)} of 3 pieces still held after the answer ended"
