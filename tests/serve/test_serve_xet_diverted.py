"""A xorb's body goes from uvicorn's parser to its writer thread (hubserver/xet/diverted.py,
issue 79), not through ASGI messages and the middlewares: taken whole however it is cut and
sent (Content-Length or chunked, with pauses), counted by the metrics, past a limit refused,
and a body cut by its client keeps nothing; the writer is waited for before an answer."""

from __future__ import annotations

import asyncio
import io
import os
import re
import socket
import threading
import time
from urllib.parse import urlsplit

import httpx
import pytest
from starlette.requests import ClientDisconnect

from ocibridge.hubserver.guard import BodyTooLarge, Shares
from ocibridge.hubserver.xet import merkle
from ocibridge.hubserver.xet import shards as xetformat
from ocibridge.hubserver.xet.diverted import DivertedBody, TooLarge
from ocibridge.hubserver.xet.permits import ReadPermit
from ocibridge.hubserver.xet.xorbcheck import XorbCheck
from tests.serving import serving

pytest.importorskip("httptools")
TOKEN = "s3cret"


def xorb_of(chunks: list[bytes]) -> tuple[bytes, str]:
    """A xorb of chunks stored as they are, and its hash's text."""
    body = b"".join(b"\x00" + len(c).to_bytes(3, "little") + b"\x00" + len(c).to_bytes(3, "little") + c
                    for c in chunks)
    return body, merkle.hex_of(xetformat.verified_xorb_hash(io.BytesIO(body), len(body)))


@pytest.fixture
def served(tmp_path):
    (tmp_path / "lay").mkdir()
    with serving([f"oci:{tmp_path}/lay"], tokens=(f"{TOKEN} write",)) as s:
        upload = s.app.state.serve.xet_upload

        async def not_this_way(*args, **kwargs):
            raise AssertionError("a xorb body was read as ASGI messages")

        upload._receive = not_this_way  # shards still are: their route calls it, never a xorb's here
        yield s


def grant(served) -> tuple[str, str]:
    answer = httpx.get(f"{served.url}/api/models/acme/up/xet-write-token/main",
                       headers={"Authorization": f"Bearer {TOKEN}"}).json()
    return answer["casUrl"], answer["accessToken"]


def received(served) -> float:
    page = httpx.get(f"{served.url}/metrics").text
    found = re.search(r"^ocibridge_serve_received_bytes_total (\S+)$", page, re.M)
    assert found is not None
    return float(found.group(1))


def post(served, name: str, pieces: list[bytes], *, chunked: bool = False, close_after: bool = False) -> bytes:
    """POST a xorb body in ``pieces`` (a pause between each); the answer (b"" once closed early)."""
    cas, token = grant(served)
    where = urlsplit(cas)
    s = socket.create_connection((where.hostname, where.port), timeout=30)
    framing = ("Transfer-Encoding: chunked" if chunked else f"Content-Length: {sum(map(len, pieces))}")
    s.sendall(f"POST {where.path}/v1/xorbs/default/{name} HTTP/1.1\r\nHost: {where.netloc}\r\n"
              f"Authorization: Bearer {token}\r\n{framing}\r\n\r\n".encode())
    for piece in pieces:
        s.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece)
        time.sleep(0.01)
    if close_after:
        s.close()
        return b""
    if chunked:
        s.sendall(b"0\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
        got = s.recv(65536)
        if not got:
            break
        answer += got
    s.close()
    return answer


def kept(served) -> dict[str, bytes]:
    xorbs = served.app.state.serve.xet_upload.xorbs
    return {p.name: p.read_bytes() for p in xorbs.iterdir()} if xorbs.is_dir() else {}


@pytest.mark.parametrize("chunked", [False, True])
def test_a_xorb_body_cut_anyhow_is_taken_whole_past_the_middlewares(served, chunked):
    body, name = xorb_of([os.urandom(n) for n in (70_000, 65_536, 1, 130_000)] * 6)  # ~1.6 MiB
    cuts = [0, 3, 8, 9, 1000, 65_544, 300_000, 300_001, 900_000, len(body)]
    before = received(served)
    answer = post(served, name, [body[a:b] for a, b in zip(cuts, cuts[1:], strict=False)], chunked=chunked)
    assert answer.startswith(b"HTTP/1.1 200") and b'"was_inserted":true' in answer.replace(b" ", b""), answer
    assert kept(served)[name] == body
    assert received(served) - before >= len(body)  # the metrics count what went past them


def test_a_xorb_body_that_is_not_its_hash_is_refused_and_one_cut_short_keeps_nothing(served):
    body, name = xorb_of([os.urandom(100_000) for _ in range(8)])
    other, _ = xorb_of([os.urandom(100_000) for _ in range(8)])
    answer = post(served, name, [other[:500_000], other[500_000:]])
    assert answer.startswith(b"HTTP/1.1 400") and b"do not hash to the name" in answer
    post(served, name, [body[:600_000]], close_after=True)  # the client goes away mid-body
    time.sleep(0.5)
    assert name not in kept(served)
    tmp = served.app.state.serve.staging.tmp
    assert not tmp.is_dir() or not [p for p in tmp.iterdir() if p.is_file()]
    answer = post(served, name, [body])  # and the next upload of it is taken
    assert answer.startswith(b"HTTP/1.1 200"), answer
    assert kept(served)[name] == body


def test_a_xorb_being_received_has_the_disk_blocks_of_its_declared_length_and_keeps_its_size(served):
    """Its blocks are taken as its body begins (written into, not allocated a page at a time),
    while the file's size stays what was written: a body cut short leaves no zeros, and nothing."""
    body, name = xorb_of([os.urandom(65_536) for _ in range(64)])  # ~4 MiB
    cas, token = grant(served)
    where = urlsplit(cas)
    tmp = served.app.state.serve.staging.tmp
    for whole in (False, True):
        s = socket.create_connection((where.hostname, where.port), timeout=30)
        s.sendall(f"POST {where.path}/v1/xorbs/default/{name} HTTP/1.1\r\nHost: {where.netloc}\r\n"
                  f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body[:100_000])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            files = [p for p in tmp.glob("upload-*") if p.is_file()]
            if files and files[0].stat().st_blocks * 512 >= len(body):
                break
            time.sleep(0.02)
        [receiving] = files
        st = receiving.stat()
        assert st.st_blocks * 512 >= len(body), st  # on main: only the pages written so far
        assert st.st_size <= 100_000, st
        if not whole:
            s.close()  # the client goes away: nothing kept, nothing left behind
            deadline = time.monotonic() + 20
            while receiving.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert not receiving.exists()
            continue
        s.sendall(body[100_000:])
        answer = b""
        while not answer.rstrip().endswith(b"}"):
            got = s.recv(65536)
            if not got:
                break
            answer += got
        s.close()
        assert answer.startswith(b"HTTP/1.1 200"), answer
        kept_file = served.app.state.serve.xet_upload.xorbs / name
        assert kept_file.read_bytes() == body and kept_file.stat().st_size == len(body)


def test_a_client_that_waits_for_100_continue_gets_it_before_its_body_is_diverted(served):
    body, name = xorb_of([os.urandom(100_000) for _ in range(3)])
    cas, token = grant(served)
    where = urlsplit(cas)
    with socket.create_connection((where.hostname, where.port), timeout=30) as s:
        s.sendall(f"POST {where.path}/v1/xorbs/default/{name} HTTP/1.1\r\nHost: {where.netloc}\r\n"
                  f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n"
                  "Expect: 100-continue\r\n\r\n".encode())
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue")  # nothing sent yet: it waits for this
        s.sendall(body)
        answer = b""
        while not answer.rstrip().endswith(b"}"):
            answer += s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200"), answer
    assert kept(served)[name] == body


# -- DivertedBody on its own: pacing, limits and failures ----------------------------------------------


class Pace:
    def __init__(self) -> None:
        self.paused = False
        self.pauses = 0

    def pause(self) -> None:
        self.paused = True
        self.pauses += 1

    def resume(self) -> None:
        self.paused = False


def body_into(out: io.BytesIO, pool, write=None, **kwargs) -> tuple[DivertedBody, Pace, XorbCheck]:
    check, pace = XorbCheck(), Pace()

    def take(o, pieces, c) -> None:
        o.writelines(pieces)
        c.feed(pieces)

    kwargs.setdefault("limit", 1 << 30)
    kwargs.setdefault("guard_limit", None)
    kwargs.setdefault("permit", None)
    body = DivertedBody(out, check, pool, write=write or take, piece=1000, **kwargs)
    body.attach((pace.pause, pace.resume))
    return body, pace, check


def test_reading_pauses_while_the_writer_is_behind_and_every_byte_lands_in_order():
    from concurrent.futures import ThreadPoolExecutor

    xorb, name = xorb_of([os.urandom(700) for _ in range(20)])
    gate = threading.Event()

    async def main() -> None:
        out = io.BytesIO()
        with ThreadPoolExecutor(1) as pool:
            def slow(o, pieces, c) -> None:
                gate.wait(10)  # the first piece's write holds the writer
                o.writelines(pieces)
                c.feed(pieces)

            body, pace, check = body_into(out, pool, write=slow)
            for k in range(0, len(xorb), 300):
                body.feed(xorb[k:k + 300])
                if pace.paused:
                    break
            assert pace.paused and pace.pauses == 1  # a piece written, one gathered: no more read
            fed = k + 300
            gate.set()
            for _ in range(100):
                if not pace.paused:
                    break
                await asyncio.sleep(0.01)
            assert not pace.paused  # the writer caught up: reading resumed
            for k in range(fed, len(xorb), 300):
                body.feed(xorb[k:k + 300])
                while pace.paused:
                    await asyncio.sleep(0.01)
            body.end()
            assert await body.taken() == len(xorb)
        assert out.getvalue() == xorb
        assert check.result(merkle.from_hex(name) or b"")[0] is None

    asyncio.run(main())


def test_past_a_limit_a_lost_connection_or_a_failed_write_the_body_fails_as_before():
    from concurrent.futures import ThreadPoolExecutor

    async def fails(expected: type[BaseException], **kwargs) -> None:
        with ThreadPoolExecutor(1) as pool:
            def broken(o, pieces, c) -> None:
                raise OSError(28, "No space left on device")

            write = broken if expected is OSError else None
            body, _, _ = body_into(io.BytesIO(), pool, write=write, **kwargs)
            for _ in range(5):
                body.feed(b"x" * 600)
                await asyncio.sleep(0.01)
            if expected is ClientDisconnect:
                body.lost()
            body.feed(b"x" * 600)  # what comes after is dropped
            body.end()
            with pytest.raises(expected):
                await body.taken()

    async def main() -> None:
        await fails(TooLarge, limit=2000)
        await fails(BodyTooLarge, limit=5000, guard_limit=2000)  # the guard's, answered by the guard
        await fails(ClientDisconnect)
        await fails(OSError)

    asyncio.run(main())


def test_a_body_that_stalled_takes_a_permit_again_before_it_is_read_on(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from ocibridge.hubserver.xet import permits

    monkeypatch.setattr(permits, "STALL", 0.05)

    async def main() -> None:
        shares = Shares(1, 1)
        permit, other = ReadPermit(shares, "w"), ReadPermit(shares, "w")
        await permit.take()
        with ThreadPoolExecutor(1) as pool:
            body, pace, _ = body_into(io.BytesIO(), pool, permit=permit)
            body.feed(b"a" * 10)
            await asyncio.sleep(0.2)  # silent: the permit goes back, and another upload takes it
            assert not permit.held
            await other.take()
            body.feed(b"b" * 10)
            assert pace.paused  # no more is read until a permit is taken again
            await asyncio.sleep(0.05)
            assert pace.paused
            other.give()
            await asyncio.sleep(0.05)
            assert permit.held and not pace.paused
            body.end()
            assert await body.taken() == 20
            permit.give()

    asyncio.run(main())


def test_a_uvicorn_without_the_fields_divert_reads_leaves_the_body_to_asgi():
    """divert reads uvicorn's own fields (the cycle's body buffer, its 100-continue flag, the
    flow control): a uvicorn where one is gone answers None, so the route reads the body as ASGI
    messages as before rather than failing."""
    from types import SimpleNamespace

    from ocibridge.hubserver.protocol import GuardedProtocol

    scope: dict = {}
    cycle = SimpleNamespace(scope=scope, response_complete=False, more_body=True, disconnected=False)
    assert GuardedProtocol.divert(SimpleNamespace(scope=scope, cycle=cycle), scope, object()) is None  # no body
    cycle.body, cycle.waiting_for_100_continue = bytearray(), False
    assert GuardedProtocol.divert(SimpleNamespace(scope=scope, cycle=cycle), scope, object()) is None  # no flow
