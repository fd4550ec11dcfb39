"""Session-scoped pytest fixtures for real registries; tests/conftest.py imports them.

Registry fixtures never skip: without `docker-registry` (and without OCIBRIDGE_TEST_REGISTRY)
they fail with the command that installs it.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import socket
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from .certs import make_tls_files
from .faultproxy import FaultProxy
from .registry import (
    ENV_EXTERNAL,
    ENV_EXTERNAL2,
    ExternalRegistry,
    RegistryProcess,
    RegistryUnavailable,
    external_registry,
)
from .runtimes import Containerd, Podman, RuntimeUnavailable
from .token_registry import TokenRegistry

T = TypeVar("T")


def new_repo(prefix: str = "test") -> str:
    """A repository name nobody else uses in this registry: `<prefix>/<8 hex>`."""
    return f"{prefix}/{uuid.uuid4().hex[:8]}"


def _start(factory: Callable[[], T]) -> T:
    try:
        return factory()
    except RegistryUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


def _plain(tmp_path_factory: pytest.TempPathFactory, env: str,
           name: str) -> Iterator[RegistryProcess | ExternalRegistry]:
    external = external_registry(env)
    if external is not None:
        yield external
        return
    workdir = Path(tmp_path_factory.mktemp(name))
    proc = _start(lambda: RegistryProcess(workdir))
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryProcess | ExternalRegistry]:
    """A plain-HTTP anonymous registry (or the one named by OCIBRIDGE_TEST_REGISTRY)."""
    yield from _plain(tmp_path_factory, ENV_EXTERNAL, "registry")


@pytest.fixture(scope="session")
def registry2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryProcess | ExternalRegistry]:
    """A second, independent plain registry (OCIBRIDGE_TEST_REGISTRY2 if set)."""
    yield from _plain(tmp_path_factory, ENV_EXTERNAL2, "registry2")


@pytest.fixture(scope="session")
def auth_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryProcess]:
    """htpasswd Basic auth; `.username` / `.password`."""
    workdir = Path(tmp_path_factory.mktemp("auth-registry"))
    creds = ("ocibridge", "pw-" + secrets.token_hex(8))
    proc = _start(lambda: RegistryProcess(workdir, htpasswd=creds))
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def token_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenRegistry]:
    """`auth: token` registry + our token server; alice may push team/*, pull elsewhere."""
    workdir = Path(tmp_path_factory.mktemp("token-registry"))
    reg = _start(lambda: TokenRegistry(workdir))
    try:
        yield reg
    finally:
        reg.stop()


@pytest.fixture(scope="session")
def tls_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryProcess]:
    """HTTPS with a generated CA: `.ca_file` (PEM) and `.cert_dir` (ca.crt, for skopeo)."""
    workdir = Path(tmp_path_factory.mktemp("tls-registry"))
    tls = make_tls_files(workdir / "pki")
    proc = _start(lambda: RegistryProcess(workdir / "registry", tls=tls))
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def mtls_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryProcess]:
    """HTTPS that requires a client certificate signed by its CA (`.tls_files.client_cert/_key`)."""
    workdir = Path(tmp_path_factory.mktemp("mtls-registry"))
    tls = make_tls_files(workdir / "pki")
    proc = _start(lambda: RegistryProcess(workdir / "registry", tls=tls, require_client_cert=True))
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def unique_repo() -> str:
    """`test/<8 hex>`: a fresh repository name for this test."""
    return new_repo()


@pytest.fixture
def fault_proxy(registry: RegistryProcess | ExternalRegistry) -> Iterator[FaultProxy]:
    """A fresh fault-injecting proxy in front of `registry` (no rules yet)."""
    proxy = FaultProxy(registry)
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(scope="session")
def containerd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Containerd]:
    """A private containerd (own root, state, socket; no CRI plugin): `.pull`, `.mounted`."""
    try:
        daemon = Containerd(Path(tmp_path_factory.mktemp("containerd")))
    except RuntimeUnavailable as exc:
        pytest.fail(f"containerd: {exc}", pytrace=False)
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="session")
def podman() -> Iterator[Podman]:
    """podman with a storage root of its own: `.pull`, `.mounted`. Its folder is a short one of
    its own under /tmp: podman refuses a runroot longer than 50 characters, which pytest's base
    temporary folder under a pytest-xdist worker (…/pytest-N/popen-gw0/podman0/overlay/run) is."""
    workdir = Path(tempfile.mkdtemp(prefix="ocib-podman-"))
    try:
        tool = Podman(workdir)
    except RuntimeUnavailable as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.fail(f"podman: {exc}", pytrace=False)
    try:
        yield tool
    finally:
        tool.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def stalling_server() -> Iterator[str]:
    """``host:port`` of a server that answers any GET with a 50 MB Content-Length, sends 3 MB,
    then stalls: a download blocked on the network, for tests of what stops it."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while not done.is_set():
                conn, _ = listener.accept()
                conns.append(conn)
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 50000000\r\n\r\n" + bytes(3_000_000))

    threading.Thread(target=serve, daemon=True).start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    done.set()
    listener.close()
    for conn in conns:
        conn.close()
