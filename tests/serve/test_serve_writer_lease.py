"""One writer, enforced (issue 76): two serves started with write tokens over one registry prefix
and no ``--writer`` both said "writes on", and of 8 concurrent upload_file calls, 4 through
each, 4 commits were answered and then lost (a registry has no compare-and-swap on a tag). The
writer lease (hubserver/replicas/writerlease.py) lets one take writes: the other names it and
refuses them in the Hub's shape, takes over when it dies, and a paused writer whose lease
lapsed moves no branch. Processes, a real registry, the real huggingface_hub; the lease's times
are the test's (seconds, not the defaults' half minute)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError
from serve_processes import ServeProcess
from serving import hub_retries_at_once, point_hub_at
from support.faultproxy import FaultProxy, delay

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

EXPIRY, RENEW, SETTLE = 4.0, 1.0, 0.2
FAST = {"OCIBRIDGE_SERVE_LEASE_EXPIRY": str(EXPIRY), "OCIBRIDGE_SERVE_LEASE_RENEW": str(RENEW),
        "OCIBRIDGE_SERVE_LEASE_SETTLE": str(SETTLE)}
#: the most a waiting serve takes to take a dead writer's lease, as docs/serve.md counts it: the
#: last renewal seen up to half a renewal period late, watched for the expiry, looked at half a
#: period late again, then written and read back; with slack for a loaded machine (a bound on a
#: takeover that never comes, not a speed)
TAKEOVER = RENEW / 2 + EXPIRY + RENEW / 2 + SETTLE + 30
#: the longest expiry serve takes, past any wait of these tests for writes (TAKEOVER): a lease
#: taken under it was let go (released, or its lock dropped), it did not expire
NEVER = {**FAST, "OCIBRIDGE_SERVE_LEASE_EXPIRY": "60"}
WRITE = {"Authorization": "Bearer writer-token"}


def serves(home: Path, prefix: str, *more: str, env: dict[str, str] = FAST) -> ServeProcess:
    """A serve of the test's own (no module's shared one: each test kills, stops, pauses or starts
    again the serves it holds, over a prefix nobody else writes, with lease times of its own)."""
    return ServeProcess(home, (prefix, *more), env=env)


@pytest.fixture
def two(registry, tmp_path) -> Iterator[tuple[ServeProcess, ServeProcess, str]]:
    """The first serve with write tokens over a prefix, then a second one over the same prefix."""
    yield from pair(registry, tmp_path, FAST)


@pytest.fixture
def two_unexpiring(registry, tmp_path) -> Iterator[tuple[ServeProcess, ServeProcess, str]]:
    """:func:`two` with a lease no test outlives: one taken was let go."""
    yield from pair(registry, tmp_path, NEVER)


def pair(registry, tmp_path: Path, env: dict[str, str]) -> Iterator[tuple[ServeProcess, ServeProcess, str]]:
    prefix = f"{registry.host}/test/{uuid.uuid4().hex[:8]}"
    first = serves(tmp_path / "first", prefix, env=env).start()
    second = serves(tmp_path / "second", prefix, env=env)
    try:
        second.start()
        yield first, second, prefix
    finally:
        for served in (second, first):
            if served.proc is not None and served.proc.poll() is None:
                served.proc.send_signal(signal.SIGCONT)
                served.stop()


def banner(served: ServeProcess) -> str:
    """The start line of the serve's last start."""
    return [line for line in served.log.read_text().splitlines() if "serving the Hugging Face Hub API" in line][-1]


def holder(served: ServeProcess) -> str:
    assert served.proc is not None
    return f"{served.url} (host {socket.gethostname()}, pid {served.proc.pid})"


def upload(via: ServeProcess, n: int, repo: str = "acme/lease") -> str:
    return HfApi(endpoint=via.url, token="writer-token").upload_file(
        path_or_fileobj=f"file {n}\n".encode(), path_in_repo=f"f/{n:02d}.txt", repo_id=repo,
        commit_message=f"file {n}").oid


def preupload(via: ServeProcess) -> httpx.Response:
    """A write asked of ``via`` (huggingface_hub's first request of a commit), with no retries."""
    return httpx.post(f"{via.url}/api/models/acme/lease/preupload/main", headers=WRITE,
                      json={"files": [{"path": "x.txt", "size": 1, "sample": ""}]})


def until_writes(via: ServeProcess, seconds: float) -> float:
    """Seconds until ``via`` takes writes (its 503s asked again every 0.1 s, not after the
    Retry-After huggingface_hub waits for); ``seconds`` bounds a takeover that never comes."""
    began = time.monotonic()
    while (answer := preupload(via)).status_code == 503:
        assert time.monotonic() < began + seconds, f"writes never taken: {answer.text}"
        time.sleep(0.1)
    assert answer.status_code == 200, answer.text
    return time.monotonic() - began


def commits(via: ServeProcess, repo: str = "acme/lease") -> set[str]:
    return {c.commit_id for c in HfApi(endpoint=via.url, token="reader-token").list_repo_commits(repo)}


def test_a_second_writer_names_the_first_refuses_writes_loses_none_and_takes_over_when_it_dies(
        two, tmp_path, monkeypatch):
    first, second, prefix = two
    point_hub_at(monkeypatch, first.url, tmp_path / "hub")
    hub_retries_at_once(monkeypatch)  # the second's 503s are retried (the first holds the lease throughout)
    lease = f"{prefix}/ocibridge-serve:ocibridge-writer"
    assert "writes on (write tokens publish)" in banner(first)
    assert f"writes refused here: {holder(first)} holds the writer lease ({lease}) and takes them" in banner(second)

    # a write through the second: the Hub's error shape, naming the writer, with Retry-After
    answer = preupload(second)
    assert answer.status_code == 503, answer.text
    assert holder(first) in answer.headers["x-error-message"]
    assert answer.json()["error"] == answer.headers["x-error-message"]
    assert int(answer.headers["retry-after"]) >= 1

    HfApi(endpoint=first.url, token="writer-token").create_repo("acme/lease")
    landed: dict[int, str] = {}
    refused: dict[int, int] = {}

    def one(n: int) -> None:
        try:
            landed[n] = upload((first, second)[n % 2], n)
        except HfHubHTTPError as e:
            refused[n] = e.response.status_code

    threads = [threading.Thread(target=one, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(landed) == [0, 2, 4, 6] and refused == {1: 503, 3: 503, 5: 503, 7: 503}, (landed, refused)
    for via in (first, second):  # every commit answered is on main, read through either
        assert set(landed.values()) <= commits(via), via

    first.kill()  # SIGKILL: the lease is not released; the second waits out its expiry
    took = until_writes(second, TAKEOVER)
    assert took >= EXPIRY - RENEW  # not before the dead writer's lease could have lapsed (its last renewal)
    landed[8] = upload(second, 8)
    assert set(landed.values()) <= commits(second)
    assert "this serve holds the writer lease" in second.log.read_text()


def test_a_writer_stopped_cleanly_is_replaced_at_once_and_a_restart_on_its_cache_takes_it_back(two_unexpiring,
                                                                                                 tmp_path, monkeypatch):
    """SIGTERM releases the lease: the second takes writes within a look, not the expiry. A
    writer killed and started again on its own cache finds its own id in the lease (it is
    kept in the cache) and takes writes at once."""
    first, second, _ = two_unexpiring
    point_hub_at(monkeypatch, first.url, tmp_path / "hub")
    HfApi(endpoint=first.url, token="writer-token").create_repo("acme/lease")
    oids = {upload(first, 0)}
    first.stop()
    until_writes(second, TAKEOVER)  # within the wait, short of the expiry: released
    oids.add(upload(second, 1))
    assert oids <= commits(second)

    second.kill()
    second.start()  # the same cache and port, at once: its own lease
    assert "writes on (write tokens publish)" in banner(second)
    until_writes(second, TAKEOVER)  # its own lease
    oids.add(upload(second, 2))
    assert oids <= commits(second)


def test_a_paused_writer_whose_lease_lapsed_moves_no_branch(registry, tmp_path, monkeypatch):
    """The writer is paused (SIGSTOP) in the middle of a commit, between its commit tag and its
    branch's tag; the second serve takes over and commits; the writer wakes: its commit is not
    answered 200 and main keeps the second's commit, every commit answered in its history."""
    with FaultProxy(registry) as proxy:
        hexed = uuid.uuid4().hex[:8]
        first = serves(tmp_path / "first", f"{proxy.host}/test/{hexed}").start()
        second = serves(tmp_path / "second", f"{registry.host}/test/{hexed}")
        try:
            second.start()
            assert holder(first) in banner(second)
            point_hub_at(monkeypatch, first.url, tmp_path / "hub")
            hub_retries_at_once(monkeypatch)  # the woken writer's 503s are retried (the second holds the lease)
            HfApi(endpoint=first.url, token="writer-token").create_repo("acme/lease")
            acknowledged = {upload(first, 0)}
            proxy.add("PUT", r"/acme/lease/manifests/ocibridge-commit-", delay(2.0))
            outcome: list[BaseException | str] = []

            def paused() -> None:
                try:
                    outcome.append(upload(first, 1))
                except BaseException as e:  # noqa: BLE001 - asserted below
                    outcome.append(e)

            thread = threading.Thread(target=paused)
            thread.start()
            deadline = time.monotonic() + 60
            while not proxy.requests_matching("PUT", r"/acme/lease/manifests/ocibridge-commit-"):
                assert time.monotonic() < deadline and thread.is_alive(), outcome
                time.sleep(0.01)
            assert first.proc is not None
            first.proc.send_signal(signal.SIGSTOP)  # paused with its commit tag on the way
            until_writes(second, TAKEOVER)
            acknowledged.add(upload(second, 2))
            first.proc.send_signal(signal.SIGCONT)
            thread.join(timeout=60)
            assert len(outcome) == 1 and isinstance(outcome[0], HfHubHTTPError), outcome
            assert outcome[0].response.status_code == 503
            assert "lease" in outcome[0].response.headers["x-error-message"]
            head = HfApi(endpoint=second.url, token="reader-token").model_info("acme/lease").sha
            assert head in acknowledged and acknowledged <= commits(second) and acknowledged <= commits(first)
            # the first knows it: its writes are refused (its lease lapsed), and once it has read the
            # lease record again (every renew period), refused naming the second
            until = time.monotonic() + 20
            answer = preupload(first)
            while holder(second) not in answer.headers.get("x-error-message", ""):
                assert answer.status_code == 503 and "lease" in answer.headers["x-error-message"], answer.text
                assert time.monotonic() < until, answer.text
                time.sleep(0.2)
                answer = preupload(first)
            assert answer.status_code == 503, answer.text
        finally:
            for served in (second, first):
                if served.proc is not None and served.proc.poll() is None:
                    served.proc.send_signal(signal.SIGCONT)
                    served.stop()


def test_the_lease_repository_is_no_repo_id_and_the_times_are_checked(registry, tmp_path, capsys):
    """The repo id the lease's repository stands for is refused to every write (a one-part id:
    create_repo puts a bare name under the token's namespace, a commit names it as it is) and
    left out of listings; lease times that do not fit together are one error line. (One serve,
    holding the lease: no second one is needed.)"""
    first = serves(tmp_path / "first", f"{registry.host}/test/{uuid.uuid4().hex[:8]}").start()
    try:
        assert "writes on (write tokens publish)" in banner(first)
        with pytest.raises(HfHubHTTPError) as refused:
            HfApi(endpoint=first.url, token="writer-token").upload_file(path_or_fileobj=b"x", path_in_repo="x.txt",
                                                                        repo_id="ocibridge-serve")
        assert refused.value.response.status_code == 400
        assert "serve's own repository" in refused.value.response.headers["x-error-message"]
        assert "ocibridge-serve" not in [m.id for m in HfApi(endpoint=first.url, token="reader-token").list_models()]
    finally:
        first.stop()

    from ocibridge.cli import main

    with pytest.MonkeyPatch.context() as env:
        env.setenv("OCIBRIDGE_SERVE_LEASE_RENEW", "20")
        assert main(["serve", "registry.internal:5000/models"]) == 2
    err = capsys.readouterr().err
    assert "OCIBRIDGE_SERVE_LEASE_RENEW=20: expected seconds above 0, at most a third of the expiry" in err
    assert len(err.strip().splitlines()) == 1, err


def test_a_layout_is_leased_by_a_lock_the_kernel_drops_with_the_writer(tmp_path, monkeypatch):
    """oci:DIR: the lease is flock on DIR/.ocibridge-writer; the second serve names the first and
    refuses writes, and takes them within a look once the first is killed (no expiry: the
    kernel dropped the lock)."""
    from ocibridge.stores.layout import LayoutStore

    LayoutStore(tmp_path / "lay", create=True)
    first = serves(tmp_path / "first", f"oci:{tmp_path}/lay", env=NEVER).start()  # no expiry within the test
    second = serves(tmp_path / "second", f"oci:{tmp_path}/lay", env=NEVER)
    try:
        second.start()
        assert "writes on (write tokens publish)" in banner(first)
        assert (f"writes refused here: {holder(first)} holds the writer lease ({tmp_path}/lay/.ocibridge-writer) "
                "and takes them") in banner(second)
        point_hub_at(monkeypatch, first.url, tmp_path / "hub")
        HfApi(endpoint=first.url, token="writer-token").create_repo("acme/lease")
        oids = {upload(first, 0)}
        answer = preupload(second)
        assert answer.status_code == 503 and holder(first) in answer.headers["x-error-message"], answer.text
        first.kill()
        until_writes(second, TAKEOVER)  # short of the expiry: the kernel dropped the lock
        oids.add(upload(second, 1))
        assert oids <= commits(second)
    finally:
        for served in (second, first):
            if served.proc is not None and served.proc.poll() is None:
                served.stop()


def test_a_registry_that_refuses_the_lease_is_said_once_and_writes_go_on(registry, tmp_path, monkeypatch):
    """The lease's PUT refused (403: credentials that may not push ocibridge-serve): one warning
    line at the start, and the serve takes writes without a lease, as before."""
    from support.faultproxy import status

    with FaultProxy(registry) as proxy:
        proxy.add("PUT", r"/ocibridge-serve/manifests/", status(403, body=b'{"errors":[{"code":"DENIED",'
                                                                         b'"message":"no push here"}]}'),
                  times=None)
        served = serves(tmp_path / "alone", f"{proxy.host}/test/{uuid.uuid4().hex[:8]}").start()
        try:
            lines = served.log.read_text().splitlines()
            assert "writes on (write tokens publish)" in banner(served)
            warned = [line for line in lines if "warning" in line]
            assert len(warned) == 1 and "the registry refused the writer lease" in warned[0], lines
            assert "DENIED: no push here" in warned[0] and "would lose commits" in warned[0]
            point_hub_at(monkeypatch, served.url, tmp_path / "hub")
            HfApi(endpoint=served.url, token="writer-token").create_repo("acme/lease")
            assert upload(served, 0) in commits(served)
        finally:
            served.stop()


def test_a_standby_given_the_holder_as_a_peer_sends_it_every_write_and_takes_over_when_it_dies(
        registry, tmp_path, monkeypatch):
    """``--peer URL``: a standby whose lease holder is that peer sends writes there (as a
    ``--writer`` reader does) instead of the 503: of 8 concurrent uploads, 4 through each, all
    8 land and none is lost; an LFS upload through the standby gets hrefs that lead back to it.
    A holder that is no peer still gets the 503. Once the holder dies, the standby writes itself."""
    prefix = f"{registry.host}/test/{uuid.uuid4().hex[:8]}"
    first = serves(tmp_path / "first", prefix).start()
    second = serves(tmp_path / "second", prefix, "--peer", first.url)
    third = serves(tmp_path / "third", prefix, "--peer", "http://127.0.0.1:9")  # a peer that is not the holder
    try:
        second.start()
        third.start()
        assert f"writes sent to {holder(first)}, which holds the writer lease (--peer)" in banner(second)
        assert f"writes refused here: {holder(first)} holds" in banner(third)
        assert preupload(third).status_code == 503
        third.stop()  # else it may be the one that takes the lease over below

        HfApi(endpoint=second.url, token="writer-token").create_repo("acme/lease")  # through the standby
        landed: dict[int, str] = {}
        errors: dict[int, str] = {}

        def one(n: int) -> None:
            try:
                landed[n] = upload((first, second)[n % 2], n)
            except HfHubHTTPError as e:
                errors[n] = f"{e.response.status_code} {e}"

        threads = [threading.Thread(target=one, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors and sorted(landed) == list(range(8)), errors
        assert set(landed.values()) <= commits(first) and set(landed.values()) <= commits(second)

        batch = httpx.post(f"{second.url}/acme/lease.git/info/lfs/objects/batch", headers=WRITE, json={
            "operation": "upload", "transfers": ["basic"], "objects": [{"oid": "ab" * 32, "size": 5}]})
        assert batch.status_code == 200, batch.text
        assert batch.json()["objects"][0]["actions"]["upload"]["href"].startswith(f"{second.url}/"), batch.text

        first.kill()  # SIGKILL: the second waits out the expiry, then takes the writes itself
        until_writes(second, TAKEOVER)
        landed[8] = upload(second, 8)
        assert set(landed.values()) <= commits(second)
        assert "this serve holds the writer lease" in second.log.read_text()
    finally:
        for served in (third, second, first):
            if served.proc is not None and served.proc.poll() is None:
                served.stop()


def test_peer_and_writer_together_are_one_usage_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ocibridge", "serve", "local", "--writer", "http://127.0.0.1:9",
                           "--peer", "http://127.0.0.1:8"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
                               "OCIBRIDGE_STORE": str(tmp_path / "store")}, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stderr.startswith("ocibridge: error: --writer and --peer:"), done.stderr
    assert len(done.stderr.splitlines()) == 1
