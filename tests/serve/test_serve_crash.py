"""kill -9 of the writer (issue 61, "Crashes"; issue 62's first red-team line): in the middle of
a commit (at each write it makes to the registry, before the registry saw it and after it did it
unheard), of an LFS PUT and of a Xet shard upload. After a restart on the same cache every branch
names the old commit or the new one, never a partial model; what the dead request staged is gone
within the staging expiry; the client's own retry of the same upload_folder succeeds.

The middle is made deterministic by the network, not by a hook in serve: a fault proxy holds the
request (tests/support/faultproxy.py's ``hold``) until serve is dead, then cuts it."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import HfApi
from serve_processes import ServeProcess
from serving import files_of, point_hub_at
from support.faultproxy import FaultProxy, RecordedRequest, hold
from support.publishing import MIB, model_dir

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

#: seconds an upload no commit names is kept: short, so that the test sees it go
EXPIRY = 3.0
#: what holds what a flow staged for its commit (the Xet dedupe's xorbs are a cache under its budget)
STAGED = ("tmp", "sha256", "parts", "pins", "commits")


def leftovers(writer: ServeProcess) -> list[str]:
    return sorted(str(p.relative_to(writer.staging)) for top in STAGED if (writer.staging / top).is_dir()
                  for p in (writer.staging / top).iterdir())


def wait_for(what: Callable[[], object], seconds: float, message: str) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, message
        time.sleep(0.05)


def assert_staging_empties(writer: ServeProcess) -> None:
    """Within the expiry (and a sweep or two), nothing staged is left."""
    deadline = time.monotonic() + 3 * EXPIRY + 5
    while leftovers(writer):
        assert time.monotonic() < deadline, f"still staged after the expiry: {leftovers(writer)}"
        time.sleep(0.1)


def a_version(root: Path, n: int) -> Path:
    """The model with new weights and notes: version ``n`` of the same files (upload_folder deletes none)."""
    src = model_dir(root / f"v{n}")
    (src / "notes.md").write_text(f"version {n}\n")
    return src


def main_is_one_of(writer: ServeProcess, hub: Path, *versions: Path, endpoint: str | None = None) -> str:
    """The commit main names, whose files are exactly those of one of ``versions`` (downloaded
    from ``endpoint``; None: the one huggingface_hub is pointed at)."""
    api = HfApi(endpoint=writer.url, token="reader-token")
    sha = api.model_info("acme/crash").sha
    assert sha is not None
    got = files_of(Path(huggingface_hub.snapshot_download("acme/crash", revision=sha, token="reader-token",
                                                          cache_dir=hub / sha, endpoint=endpoint)))
    got.pop(".gitattributes", None)
    assert any(got == files_of(v) for v in versions), f"main ({sha}) holds a partial model: {sorted(got)}"
    return sha


class Upload:
    """upload_folder in a thread, its outcome kept (it fails when serve dies under it, or its
    own retries land it once serve is back)."""

    def __init__(self, api: HfApi, src: Path):
        self.error: BaseException | None = None
        self.oid: str | None = None
        self.thread = threading.Thread(target=self._run, args=(api, src), daemon=True)
        self.thread.start()

    def _run(self, api: HfApi, src: Path) -> None:
        try:
            self.oid = api.upload_folder(repo_id="acme/crash", folder_path=src).oid
        except BaseException as e:  # noqa: BLE001 - what the client saw
            self.error = e

    def join(self) -> None:
        self.thread.join(timeout=180)
        assert not self.thread.is_alive(), "the client never came back"


def the_held(proxy: FaultProxy, method: str, path: str) -> Callable[[], RecordedRequest | None]:
    def held() -> RecordedRequest | None:
        return next((r for r in proxy.requests_matching(method, path) if r.action == "hold"), None)
    return held


@pytest.fixture
def registry_proxy(registry) -> Iterator[FaultProxy]:
    with FaultProxy(registry) as proxy:
        yield proxy


def crash_and_retry(writer: ServeProcess, api: HfApi, hub: Path, before: Path, after: Path, proxy: FaultProxy,
                    method: str, path: str, *, bytes_in: int | None = None, answered: bool = False,
                    skip: int = 0, staged: Callable[[], bool] = lambda: True, endpoint: str | None = None) -> str:
    """Upload ``after`` over ``before``; kill -9 the writer once ``proxy`` holds the request
    (the one after ``skip`` such; ``bytes_in`` forwarded, or the upstream ``answered``) and
    ``staged()``; restart it on the
    same cache; main is one of the two; the staging empties; the client's retry lands."""
    release = threading.Event()
    proxy.clear()
    proxy.add(method, path, hold(release, after=bytes_in, answered=answered), skip=skip)
    upload = Upload(api, after)
    held = the_held(proxy, method, path)

    def in_the_middle() -> bool:
        rec = held()
        if rec is None:
            return False
        if answered:
            return rec.answered is not None
        return (bytes_in is None or rec.request_bytes >= bytes_in) and staged()

    wait_for(in_the_middle, 60, f"the upload never reached {method} {path}: "
                                f"{[(r.method, r.path, r.action, r.request_bytes) for r in proxy.requests]} "
                                f"{leftovers(writer)} {upload.error!r}")
    writer.kill()
    release.set()
    proxy.clear()
    writer.start()  # the same cache, the same port
    main_is_one_of(writer, hub, before, after, endpoint=endpoint)
    upload.join()
    if upload.error is not None:  # the client saw its request fail: it tries again
        oid = api.upload_folder(repo_id="acme/crash", folder_path=after).oid
    else:
        assert upload.oid is not None
        oid = upload.oid
    assert main_is_one_of(writer, hub, after, endpoint=endpoint) == oid
    assert_staging_empties(writer)
    return oid


@contextlib.contextmanager
def crash_writer(root: Path, proxy: FaultProxy) -> Iterator[tuple[ServeProcess, HfApi]]:
    """A writer (in ``root``) over the registry behind ``proxy``, its repository made, stopped after."""
    prefix = f"{proxy.host}/test/{uuid.uuid4().hex[:8]}"
    writer = ServeProcess(root / "writer", (prefix, "--staging-expiry", str(EXPIRY), "--xet-min-size", "off"))
    writer.start()
    try:
        api = HfApi(endpoint=writer.url, token="writer-token")
        api.create_repo("acme/crash")
        yield writer, api
    finally:
        writer.stop()


@pytest.fixture
def lfs_writer(tmp_path, registry_proxy, monkeypatch) -> Iterator[tuple[ServeProcess, HfApi]]:
    """A writer over the registry behind ``registry_proxy``, huggingface_hub pointed at it, over LFS."""
    with crash_writer(tmp_path, registry_proxy) as (writer, api):
        point_hub_at(monkeypatch, writer.url, tmp_path / "hub")
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
        yield writer, api


#: writers the crash points of one commit are spread over, each crashed at its points in turn: a
#: point waits out the staging expiry, idle, and the writers wait theirs at once
LANES = 3


def test_kill_9_at_every_registry_write_of_a_commit(tmp_path, lfs_writer, registry_proxy, registry):
    """A commit's writes to the registry, each held (before the registry saw it, and once it
    answered), serve killed there: main is the old commit or the whole new one, every time."""
    writer, api = lfs_writer
    hub = tmp_path / "hub"
    old = a_version(tmp_path, 0)
    api.upload_folder(repo_id="acme/crash", folder_path=old)
    # one commit, to learn what it writes: its blobs, then its manifests and tags
    registry_proxy.clear()
    probe = a_version(tmp_path, 1)
    api.upload_folder(repo_id="acme/crash", folder_path=probe)
    # the commit's own writes: not the writer lease's renewals (in its own repository, ocibridge-serve)
    puts = [r.path for r in registry_proxy.requests if r.method == "PUT" and "/acme/crash/" in r.path]
    manifests = [p for p in puts if "/manifests/" in p]
    assert manifests and any("/blobs/uploads/" in p for p in puts), puts
    points = [("/acme/crash/blobs/uploads/", 0, False)] + [("/acme/crash/manifests/", k, a)
                                                            for k in range(len(manifests)) for a in (False, True)]
    numbered = list(enumerate(points, start=2))  # each point's version: its own weights, never mounted

    def crash_in_turn(lane: int, writer: ServeProcess, api: HfApi, proxy: FaultProxy, before: Path,
                      endpoint: str | None) -> None:
        """The lane's points, one after another on the same writer and cache: each commit over the last."""
        for n, (path, skip, answered) in numbered[lane::LANES]:
            after = a_version(tmp_path, n)
            crash_and_retry(writer, api, hub / str(lane), before, after, proxy, "PUT", path, skip=skip,
                            answered=answered, endpoint=endpoint)
            before = after

    def other_lane(lane: int) -> None:
        """A writer of its own over the same registry, behind a proxy of its own, with a first commit."""
        with FaultProxy(registry) as proxy, crash_writer(tmp_path / f"lane-{lane}", proxy) as (other, other_api):
            first = a_version(tmp_path / f"lane-{lane}", 0)
            other_api.upload_folder(repo_id="acme/crash", folder_path=first)
            crash_in_turn(lane, other, other_api, proxy, first, other.url)

    with ThreadPoolExecutor(LANES - 1) as pool:
        others = [pool.submit(other_lane, lane) for lane in range(1, LANES)]
        crash_in_turn(0, writer, api, registry_proxy, probe, None)
        for done in others:
            done.result()


@contextlib.contextmanager
def behind_a_proxy(tmp_path: Path, registry, xet_min: str,
                   client: Callable[[str], None]) -> Iterator[tuple[ServeProcess, FaultProxy, HfApi, Path]]:
    """A writer behind a fault proxy (its --public-url: the URLs it hands out lead through it),
    ``client(url)`` pointing huggingface_hub there, a first commit made: (writer, proxy, api, files)."""
    prefix = f"{registry.host}/test/{uuid.uuid4().hex[:8]}"
    writer = ServeProcess(tmp_path / "writer", ())
    with FaultProxy(writer.url) as front:
        writer.args = (prefix, "--staging-expiry", str(EXPIRY), "--xet-min-size", xet_min, "--public-url", front.url)
        writer.start()
        try:
            client(front.url)
            api = HfApi(endpoint=front.url, token="writer-token")
            api.create_repo("acme/crash")
            old = a_version(tmp_path, 0)
            api.upload_folder(repo_id="acme/crash", folder_path=old)
            yield writer, front, api, old
        finally:
            writer.stop()
    assert os.environ.get("OCIBRIDGE_CACHE") != str(writer.cache)  # the writer's cache was its own


def test_kill_9_in_the_middle_of_an_lfs_put(tmp_path, registry, monkeypatch):
    """The writer killed with half an LFS object received (a proxy in front of serve holds the
    rest): the half in staging goes within the expiry, the retry lands."""
    def lfs_client(url: str) -> None:
        point_hub_at(monkeypatch, url, tmp_path / "hub")
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)

    with behind_a_proxy(tmp_path, registry, "off", lfs_client) as (writer, front, api, old):
        def half_staged() -> bool:
            tmp = writer.staging / "tmp"
            return tmp.is_dir() and any(f.stat().st_size >= MIB for f in tmp.iterdir())

        after = a_version(tmp_path, 1)
        # the weights' PUT, by its size in the URL: huggingface_hub PUTs the version's LFS files at
        # once, and a rule on any PUT held the small notes.md's instead, one run in two
        weights = max(after.rglob("*"), key=lambda f: f.stat().st_size if f.is_file() else -1)
        crash_and_retry(writer, api, tmp_path / "hub", old, after, front, "PUT",
                        rf"^/ocibridge/lfs/[0-9a-f]{{64}}/{weights.stat().st_size}/", bytes_in=3 * MIB // 2,
                        staged=half_staged)


def test_kill_9_in_the_middle_of_a_xet_shard(tmp_path, registry, monkeypatch):
    """hf_xet's shard half sent when the writer dies (its xorbs in already): after the restart
    the branch is the old commit or the new, the staging empties, the retry lands."""
    pytest.importorskip("hf_xet")
    from test_serve_publish import xet_only

    with behind_a_proxy(tmp_path, registry, "1M", lambda url: xet_only(monkeypatch, url, tmp_path / "hub")) \
            as (writer, front, api, old):
        crash_and_retry(writer, api, tmp_path / "hub", old, a_version(tmp_path, 1), front, "POST",
                        r"/xet-write/.*/shards", bytes_in=64)
