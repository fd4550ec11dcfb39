"""The permits to read xorb bodies (hubserver/xet/permits.py) are held while a body moves, not
while its client is silent: uploads that send their headers and then nothing give their permits
back, so they cannot keep every other upload unread; and such an upload, once its body comes
after all, takes a permit again and is taken whole. (Found in review: before, 16 stalled uploads
of one anonymous client held every permit for as long as their connections lasted.)"""

from __future__ import annotations

import asyncio
import io
import time

import pytest
from starlette.requests import Request

from ocibridge.hubserver.signer import Signer
from ocibridge.hubserver.uploads.staging import Staging
from ocibridge.hubserver.xet import merkle, permits
from ocibridge.hubserver.xet import shards as xetformat
from ocibridge.hubserver.xet.upload import RECEIVING_AT_ONCE, XetUpload


def one_chunk_xorb(data: bytes) -> tuple[bytes, str]:
    body = b"\x00" + len(data).to_bytes(3, "little") + b"\x00" + len(data).to_bytes(3, "little") + data
    return body, merkle.hex_of(xetformat.verified_xorb_hash(io.BytesIO(body), len(body)))


def request(name: str, receive) -> Request:
    scope = {"type": "http", "method": "POST", "path": f"/xet-write/up/v1/xorbs/default/{name}",
             "headers": [], "query_string": b"", "path_params": {"name": "up", "prefix": "default", "hash": name}}
    return Request(scope, receive)


def test_stalled_xorb_bodies_give_their_permits_back(tmp_path, monkeypatch):
    monkeypatch.setattr(permits, "STALL", 1.0)  # longer than a loaded machine takes to start the 16
    upload = XetUpload(Staging(tmp_path / "staging"), Signer([]), lambda r: "http://serve")  # an open server
    stalled_bodies = [one_chunk_xorb(bytes([k]) * 10) for k in range(RECEIVING_AT_ONCE)]
    resume = asyncio.Event

    async def main() -> None:
        go = resume()

        def slow(body: bytes):
            sent = False

            async def receive():  # headers, then nothing until `go`, then the whole body
                nonlocal sent
                if not sent:
                    await go.wait()
                    sent = True
                    return {"type": "http.request", "body": body, "more_body": False}
                await asyncio.Event().wait()
            return receive

        stalled = [asyncio.ensure_future(upload.xorb(request(name, slow(body)))) for body, name in stalled_bodies]
        started = time.monotonic()  # each takes its permit after a thread's turn (the quota check)
        while upload.reading < RECEIVING_AT_ONCE and time.monotonic() - started < 0.9:
            await asyncio.sleep(0.01)
        assert upload.reading == RECEIVING_AT_ONCE  # every permit taken by a silent upload
        body, name = one_chunk_xorb(b"a real upload")

        async def whole():
            return {"type": "http.request", "body": body, "more_body": False}

        answer = await asyncio.wait_for(upload.xorb(request(name, whole)), 5)
        assert answer.status_code == 200 and b'"was_inserted":true' in answer.body
        for _ in range(200):  # each silent one gives its permit back within two of its watches
            if upload.reading == 0:
                break
            await asyncio.sleep(0.05)
        assert upload.reading == 0
        go.set()  # their bodies come after all: each takes a permit again, and is kept
        answers = await asyncio.wait_for(asyncio.gather(*stalled), 10)
        assert [a.status_code for a in answers] == [200] * RECEIVING_AT_ONCE
        assert upload.reading == 0

    asyncio.run(main())
    kept = {p.name for p in (tmp_path / "staging" / "xorbs").iterdir()}
    assert {merkle.hex_of(merkle.from_hex(n) or b"") for _, n in stalled_bodies} <= kept


@pytest.mark.parametrize("cpus", [16, 2])
def test_received_bodies_are_written_on_a_few_threads_at_most(tmp_path, monkeypatch, cpus):
    """Every xorb body read at once used to be written and checked on a thread of its own: a
    thread a body (13 over a 4 GiB upload), each keeping memory of its own. At most
    WRITING_AT_ONCE write at once now, and no more than the CPUs serve may use; the others
    wait their turn and are all kept."""
    import threading
    import time

    from ocibridge.core import capacity
    from ocibridge.hubserver.xet import upload as upload_module

    monkeypatch.setattr(capacity, "_affinity", lambda: set(range(cpus)))

    real, lock = upload_module._take, threading.Lock()
    now, most, threads = [0], [0], set()

    def slow_take(out, pieces, check):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
            threads.add(threading.get_ident())
        time.sleep(0.05)  # a slow disk: every body is being written at once, unless bounded
        real(out, pieces, check)
        with lock:
            now[0] -= 1

    monkeypatch.setattr(upload_module, "_take", slow_take)
    upload = XetUpload(Staging(tmp_path / "staging"), Signer([]), lambda r: "http://serve")
    bodies = [one_chunk_xorb(bytes([k]) * 1000) for k in range(12)]

    async def main() -> list[int]:
        def whole(body: bytes):
            async def receive():
                return {"type": "http.request", "body": body, "more_body": False}
            return receive

        answers = await asyncio.gather(*(upload.xorb(request(name, whole(body))) for body, name in bodies))
        return [a.status_code for a in answers]

    assert asyncio.run(main()) == [200] * len(bodies)
    # some at once, never more than the bound, which is below the bodies one writer may read at once
    assert 2 <= most[0] <= min(cpus, upload_module.WRITING_AT_ONCE) < upload_module.RECEIVING_SHARE
    kept = {p.name for p in (tmp_path / "staging" / "xorbs").iterdir()}
    assert {merkle.hex_of(merkle.from_hex(n) or b"") for _, n in bodies} <= kept
