"""serve/follow.py on its own: what a follower may send of a blob still arriving. The fetch is a
function of the test that writes a file and reports its hashed prefix as the cache's download
does (the registry path itself is covered by tests/serve/test_serve.py)."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from ocibridge.errors import DigestMismatch, OcibridgeError
from ocibridge.hubserver.reading.follow import Fill, follow

DATA = os.urandom(3 << 20)


def _run(coro):  # noqa: ANN001, ANN202 - a test helper
    return asyncio.run(coro)


async def _collect(fill: Fill, start: int, end: int, got: list[bytes]) -> None:
    async for piece in follow(fill, start, end):
        got.append(piece)


def _fetcher(tmp_path: Path, steps: threading.Event, fail: BaseException | None = None):  # noqa: ANN202
    """A fetch that writes DATA into a partial file in 1 MiB steps once ``steps`` is set,
    reporting the hashed prefix; then renames it (or raises ``fail``)."""
    partial, final = tmp_path / "partial", tmp_path / "final"

    def fetch(on_hashed) -> None:  # noqa: ANN001
        fd = os.open(partial, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            for at in range(0, len(DATA), 1 << 20):
                assert steps.wait(10)
                os.pwrite(fd, DATA[at:at + (1 << 20)], at)
                on_hashed(fd, at + (1 << 20))
            if fail is not None:
                raise fail
            os.replace(partial, final)
        finally:
            os.close(fd)

    return fetch, final


def test_a_follower_gets_the_blob_and_the_end_is_reported_once(tmp_path):
    async def main() -> None:
        steps = threading.Event()
        fetch, final = _fetcher(tmp_path, steps)
        fill = Fill("sha256:" + "0" * 64, len(DATA), final)
        ended: list[Fill] = []
        got: list[bytes] = []
        task = asyncio.create_task(_collect(fill, 0, len(DATA), got))
        fill.start(fetch, ended.append)
        steps.set()
        await task
        assert b"".join(got) == DATA and ended == [fill] and fill.verified
        assert fill.sendable() == len(DATA)

    _run(main())


def test_a_follower_holds_back_the_last_byte_until_verified(tmp_path):
    async def main() -> None:
        steps = threading.Event()
        gate = threading.Event()
        partial, final = tmp_path / "partial", tmp_path / "final"

        def fetch(on_hashed) -> None:  # noqa: ANN001
            fd = os.open(partial, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, DATA, 0)
                on_hashed(fd, len(DATA))  # all hashed, not yet compared
                steps.set()
                assert gate.wait(10)
                os.replace(partial, final)
            finally:
                os.close(fd)

        fill = Fill("sha256:" + "0" * 64, len(DATA), final)
        got: list[bytes] = []
        fill.start(fetch, lambda _: None)
        task = asyncio.create_task(_collect(fill, 0, len(DATA), got))
        while not steps.is_set():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        assert fill.sendable() == len(DATA) - 1 and not task.done()
        assert len(b"".join(got)) < len(DATA)
        gate.set()
        await task
        assert b"".join(got) == DATA

    _run(main())


@pytest.mark.parametrize("fail", [DigestMismatch("blob sha256:00: wrong digest"), OcibridgeError("registry gone")])
def test_a_failed_fetch_cuts_every_follower(tmp_path, fail):
    async def main() -> None:
        steps = threading.Event()
        fetch, final = _fetcher(tmp_path, steps, fail=fail)
        fill = Fill("sha256:" + "0" * 64, len(DATA), final)
        got: list[bytes] = []
        fill.start(fetch, lambda _: None)
        steps.set()
        with pytest.raises(type(fail), match="the connection is cut"):
            await _collect(fill, 0, len(DATA), got)
        assert len(b"".join(got)) < len(DATA)  # never the whole body

    _run(main())


def test_a_download_that_starts_over_cuts_a_follower_that_sent_bytes(tmp_path):
    async def main() -> None:
        first_sent = threading.Event()
        partial, final = tmp_path / "partial", tmp_path / "final"

        def fetch(on_hashed) -> None:  # noqa: ANN001
            fd = os.open(partial, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, DATA[: 2 << 20], 0)
                on_hashed(fd, 2 << 20)
                assert first_sent.wait(10)
                on_hashed(fd, 0)  # the bytes kept from before did not verify: from byte 0 again
                os.pwrite(fd, DATA, 0)
                on_hashed(fd, len(DATA))
                os.replace(partial, final)
            finally:
                os.close(fd)

        fill = Fill("sha256:" + "0" * 64, len(DATA), final)
        sent: list[bytes] = []

        async def collect() -> None:
            async for piece in follow(fill, 0, len(DATA)):
                sent.append(piece)
                first_sent.set()

        fill.start(fetch, lambda _: None)
        with pytest.raises(DigestMismatch, match="did not verify"):
            await collect()
        assert sent and len(b"".join(sent)) < len(DATA)
        while not fill.verified:
            await asyncio.sleep(0.01)
        late: list[bytes] = []  # a request that comes after gets the blob as verified
        await _collect(fill, 0, len(DATA), late)
        assert b"".join(late) == DATA

    _run(main())


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_fetch_that_outlives_the_loop_never_calls_into_it(tmp_path, monkeypatch):
    """serve stops (its loop closes) while a fetch is mid-flight: the fetch goes on to the end,
    its blob lands, and its thread never calls into the closed loop (issue 53, item 6)."""
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    steps = threading.Event()
    fetch, final = _fetcher(tmp_path, steps)
    threads: list[threading.Thread] = []

    async def main() -> None:
        fill = Fill("sha256:" + "0" * 64, len(DATA), final)
        fill.start(fetch, lambda _: None)
        threads.extend(t for t in threading.enumerate() if t.name.startswith("fill-"))

    _run(main())  # the loop is closed when this returns
    steps.set()  # now the fetch reports its progress, and its end
    for t in threads:
        t.join(10)
    assert threads and final.read_bytes() == DATA
    assert raised == []


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_serve_stopped_while_a_registry_fill_is_mid_flight(tmp_path, registry, unique_repo, fault_proxy,
                                                           monkeypatch, capsys):
    """The app's shutdown with a fill thread mid-flight (a slow registry): the thread ends
    without touching the closed loop (the race of test_every_file_over_xet_..._tar_layers)."""
    import httpx
    from serving import serving
    from support import throttle

    from ocibridge.cli import main
    from tests.modelgen import make_bert_model

    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    src = make_bert_model(tmp_path / "big", weights=1)
    (src / "model.safetensors").write_bytes(os.urandom(2 << 20))
    assert main(["push", str(src), f"{registry.host}/{unique_repo}/acme/big:latest", "-q"]) == 0
    capsys.readouterr()
    fault_proxy.add("GET", "/blobs/sha256:", throttle(1 << 20), times=1000)
    with serving([f"{fault_proxy.host}/{unique_repo}"]) as served:
        with httpx.stream("GET", f"{served.url}/acme/big/resolve/main/model.safetensors", timeout=30) as r:
            assert r.status_code == 200
            next(r.iter_bytes())  # the fill is under way, about 2 s of it left
        fills = [t for t in threading.enumerate() if t.name.startswith("fill-")]
    assert fills  # still fetching once serve stopped and its loop closed
    for t in fills:
        t.join(30)
    assert raised == []
