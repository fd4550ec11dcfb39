"""serve's memory (issue 91): what a started serve imports, and a streamed answer letting go of
its pieces when it ends (serve's RSS after one cold GiB over Xet was 143 MiB, 66 MiB of it the
last 1 MiB piece of each xorb answer).

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
import subprocess
import sys
import weakref
from collections.abc import AsyncGenerator
from pathlib import Path
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


#: modules a serve that signs nothing and proxies no upstream never needs: each is megabytes of RSS
#: in every serve process (cryptography alone: 9 MiB of an idle serve's 62); nor, until its first
#: page, card or commit with .gitignore rules, the packages of those (12 MiB with websockets')
NOT_AT_START = ("cryptography", "huggingface_hub", "hf_xet", "numpy", "torch", "pyarrow", "safetensors",
                "jinja2", "markdown_it", "nh3", "pathspec", "wsproto")

_START = """
import sys, ocibridge, ocibridge.cli.serve, ocibridge.hubserver.server as hs
from starlette.testclient import TestClient
app = ocibridge.create_app("oci:" + sys.argv[1])
hs.server(app, hs.ServerSettings(listen="127.0.0.1:0")).config.load()  # what uvicorn loads to run it
with TestClient(app) as client:
    assert client.get("/api/models/tiny/revision/v1").status_code == 200
    assert client.get("/tiny/resolve/v1/config.json").content == b'{"version": 1}'
    print(" ".join(name for name in sys.argv[2:] if name in sys.modules))
    assert client.get("/tiny").status_code == 200
    print("jinja2" in sys.modules)
"""


def test_a_serve_without_signing_imports_none_of_the_heavy_modules_started_or_read(tmp_path: Path) -> None:
    """Started, and after its first read (the catalog's policy check imported the signature
    verifier, and cryptography with it, for a serve that verifies nothing)."""
    import ocibridge

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.json").write_text('{"version": 1}')
    ocibridge.push(str(tmp_path / "src"), f"oci:{tmp_path / 'layout'}:tiny:v1")
    done = subprocess.run([sys.executable, "-c", _START, str(tmp_path / "layout"), *NOT_AT_START],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    held, paged = done.stdout.splitlines()
    assert held.split() == []
    assert paged == "True"  # the first page loads the pages' packages
