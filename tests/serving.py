"""Running ``ocibridge serve`` for tests: the app in a uvicorn server on a free loopback port,
in a thread of the test process, and huggingface_hub pointed at it (HF_ENDPOINT read at import
time: its constants are patched as the environment variable would have set them)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import huggingface_hub
import pytest
from support.registry import RegistryProcess, registry_binary

from ocibridge.hubserver.replicas.leasetimes import LeaseTimes
from ocibridge.hubserver.repo.catalog import Catalog
from ocibridge.hubserver.repo.sources import parse_sources
from ocibridge.hubserver.server import ServerSettings as ServeOptions
from ocibridge.hubserver.server import build_app, server

ROOT = Path(__file__).resolve().parent.parent  # the checkout, on the served processes' path


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def published_files_of(root: Path) -> dict[str, bytes]:
    """The files of a repository serve created, as :func:`files_of` gives them, less the
    ``.gitattributes`` its first commit wrote (checked to be the Hub's, then left out)."""
    from ocibridge.hubserver.repo.initial import GITATTRIBUTES

    files = files_of(root)
    assert files.pop(".gitattributes", None) == GITATTRIBUTES, "no first commit's .gitattributes"
    return files


@dataclass
class Served:
    url: str
    app: Any
    catalog: Catalog
    requests: list[tuple[str, str]]  # (method, path) of every request serve answered

    @property
    def blobs(self) -> Any:
        return self.app.state.serve.blobs


@contextlib.contextmanager
def serving(sources: list[str], *, default_tag: str = "latest", tokens: tuple[str, ...] = (),
            page: int = 1000, verify: Any = None, xet_min: int | None = None,
            public_url: str | None = None, publish: Any = None, quarantine: Any = None) -> Iterator[Served]:
    catalog = Catalog(parse_sources(sources), default_tag=default_tag, verify=verify)
    options = ServeOptions(tokens=tokens, page=page, access_log=False, xet_min=xet_min, public_url=public_url,
                           publish=publish, lease=LeaseTimes.from_env(),  # the suite's short settle: conftest.py
                           quarantine=quarantine)
    app = build_app(catalog, options)
    seen: list[tuple[str, str]] = []

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append((scope["method"], scope["path"]))
        await app(scope, receive, send)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    options.listen = f"127.0.0.1:{port}"
    srv = server(counting, options)
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "serve did not start"
        time.sleep(0.01)
    try:
        yield Served(f"http://127.0.0.1:{port}", app, catalog, seen)
    finally:
        srv.should_exit = True
        thread.join(timeout=30)
        app.state.serve.close()  # lifespan="off" (server.run closes it): its writer lease thread ends here
        catalog.close()
        sock.close()


def settings_of(root: Path) -> dict[str, str]:
    """The registry settings file, cache root and accept-anything policy of its own (under
    ``root``) that conftest.py's autouse fixtures give each test: for what a fixture wider than
    one test runs (a push made once per module, a serve shared by several tests)."""
    policy = root / "accept-anything-policy.json"
    policy.write_text('{"default": [{"type": "insecureAcceptAnything"}]}')
    return {"OCIBRIDGE_REGISTRIES_CONF": str(root / "registries.toml"),
            "OCIBRIDGE_CACHE": str(root / "ocibridge-cache"), "OCIBRIDGE_POLICY": str(policy)}


@contextlib.contextmanager
def own_settings(root: Path) -> Iterator[None]:
    """:func:`settings_of` ``root`` in this process's environment, while the block runs."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in settings_of(root).items():
            patch.setenv(name, value)
        yield


def point_hub_at(monkeypatch: pytest.MonkeyPatch, url: str, hub: Path, *, xet: bool = False) -> None:
    """What ``HF_ENDPOINT=url HF_HUB_CACHE=hub`` does to huggingface_hub, in this process
    (``xet``: with hf_xet, as it runs by default; else ``HF_HUB_DISABLE_XET=1``)."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setattr(constants, "ENDPOINT", url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", not xet, raising=False)
    # transformers keeps one HfApi, its endpoint read when made: one made by an earlier test
    # (tests/hub/test_hf_cache.py) asks huggingface.co for a repository's chat templates, and this
    # machine's retries of the unreachable host cost a test ~45 s (it asks serve when made anew)
    hub_module = sys.modules.get("transformers.utils.hub")
    if hub_module is not None and hasattr(hub_module, "_hf_api"):
        monkeypatch.setattr(hub_module, "_hf_api", None)


def hub_retries_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub, in this process, retries as it does but pauses at most 0.05 s between
    tries: a 503 with serve's Retry-After (5 s) costs 6 s before each of its 5 retries, 30 s where
    a test asserts only the 503 it ends with; a download cut mid-body, 1 s per resume. For tests
    whose server stays as it is while the client retries (none waits for it to change)."""
    from huggingface_hub import file_download
    from huggingface_hub.utils import _http

    def short_sleep(seconds: float) -> None:
        time.sleep(min(seconds, 0.05))

    clock = types.SimpleNamespace(**{**vars(time), "sleep": short_sleep})
    monkeypatch.setattr(_http, "time", clock)
    monkeypatch.setattr(file_download, "time", clock)


def stop(proc: subprocess.Popen[bytes], seconds: float = 40) -> None:
    """SIGTERM, as a process manager stops serve (requests in flight finish), then kill if it
    has not left within ``seconds``."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_until_healthy(proc: subprocess.Popen[bytes], url: str, log: Path | None = None, seconds: float = 30,
                       verify: ssl.SSLContext | bool = True) -> None:
    """Until serve started as ``proc`` answers ``/healthz`` (its log in the failure if it died;
    ``verify``: the trust of an ``https`` URL)."""
    deadline = time.monotonic() + seconds
    while True:
        assert proc.poll() is None, log.read_text() if log is not None else "serve exited"
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/healthz", verify=verify).status_code == 200:
                return
        assert time.monotonic() < deadline, "serve did not start"
        time.sleep(0.02)


@contextlib.contextmanager
def serve_as_process(args: list[str], env: dict[str, str], log: Path) -> Iterator[str]:
    """``ocibridge serve ARGS`` as a process on a free loopback port, its output in ``log``;
    yields its URL once healthy, and stops it (SIGTERM) after."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ocibridge", "serve", *args, "--listen", f"127.0.0.1:{port}"],
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(proc, url, log)
        yield url
    finally:
        stop(proc)


@contextlib.contextmanager
def own_registry_and_serve(root: Path, tokens: str, sources: Callable[[str], list[str]],
                           **env: str) -> Iterator[tuple[str, RegistryProcess]]:
    """A registry of its own (its catalog only what the test writes) and ``ocibridge serve`` as a
    process over it: ``sources(registry host)`` its sources and flags, ``tokens`` its token
    file, its cache and log under ``root``; (serve's URL, the registry), both stopped after."""
    registry_binary()  # no registry binary: an error naming how to install it, never a skip
    registry = RegistryProcess(root / "registry")
    try:
        with serve_over(registry, root, tokens, sources, **env) as url:
            yield url, registry
    finally:
        registry.stop()


@contextlib.contextmanager
def serve_over(registry: RegistryProcess, root: Path, tokens: str, sources: Callable[[str], list[str]],
               **env: str) -> Iterator[str]:
    """``ocibridge serve`` as a process over ``registry`` (as :func:`own_registry_and_serve`)."""
    (root / "tokens.txt").write_text(tokens)
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "OCIBRIDGE_CACHE": str(root / "cache"), **env}
    with serve_as_process([*sources(registry.host), "--no-access-log", "--token-file", str(root / "tokens.txt")],
                          environ, root / "serve.log") as url:
        yield url


def received_until_cut(url: str, token: str) -> bytes:
    """What a reader of ``url`` got before serve cut its body (a file that failed its check, a
    fetch that broke): the read must end in an error, never as a whole body. Where the fetch failed
    before the answer began (serve waits a moment for a file's first bytes), that error is the
    Hub's 503 saying why, and nothing was received."""
    received = bytearray()
    with httpx.stream("GET", url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as answer:
        if answer.status_code == 503:
            assert answer.headers.get("x-error-message"), answer.headers
            return b""
        with pytest.raises(httpx.HTTPError):
            for chunk in answer.iter_bytes():
                received += chunk
    return bytes(received)


#: the shared serve's token file (tests/serve_processes.py's): a bare token reads; the others write
PUBLISHING_TOKENS = "reader-token\nwriter-token write * ci-bot\nacme-token write acme/\n"


@dataclass
class SharedServe:
    url: str
    prefix: str  # the registry prefix it serves
    cache: Path  # its cache root: its staging is under serve/staging


@pytest.fixture(scope="session")
def publishing_serve(registry: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServe]:
    """One ``ocibridge serve`` (a process, its write tokens its only flag) over a prefix of its own
    of the session's registry, shared by the tests that publish through a plain serve: each writes
    repositories no other test names. A test that needs flags, a restart, a log or a cache of its
    own (what it asserts would see another test's) starts its own serve."""
    from support.fixtures import new_repo

    root = tmp_path_factory.mktemp("publishing-serve")
    prefix = f"{registry.host}/{new_repo('publishing')}"
    (root / "tokens.txt").write_text(PUBLISHING_TOKENS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), **settings_of(root)}
    with serve_as_process([prefix, "--no-access-log", "--token-file", str(root / "tokens.txt")], env,
                          root / "serve.log") as url:
        yield SharedServe(url, prefix, root / "ocibridge-cache")
    assert "Traceback" not in (root / "serve.log").read_text(errors="replace")
