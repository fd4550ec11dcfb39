"""A registry that answers blob GETs with a redirect to object storage (distribution's
``redirect`` storage middleware, as registries in front of S3 or GCS run): serve follows it
without sending the registry's credentials to the storage host, and still checks every byte
it sends against the layer digest (storage that hands back other bytes is refused).

A real ``docker-registry`` with htpasswd auth and the middleware, and a static HTTP server over
its storage directory (tests/support/objectstore.py) as the storage host."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serving import serving
from support.fixtures import _start
from support.objectstore import ObjectStore
from support.registry import RegistryProcess

import ocibridge

MiB = 1 << 20


@pytest.fixture(scope="module")
def redirecting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RegistryProcess, ObjectStore, Path]]:
    """The registry (htpasswd), its storage host, and a DOCKER_CONFIG that logs in to it."""
    work = tmp_path_factory.mktemp("redirecting")
    (work / "storage").mkdir()
    store = ObjectStore(work / "storage")
    creds = ("ocibridge", "pw-" + secrets.token_hex(8))
    registry = _start(lambda: RegistryProcess(work, htpasswd=creds, redirect_to=store.url))
    docker = work / "docker"
    docker.mkdir()
    auth = base64.b64encode(":".join(creds).encode()).decode()
    (docker / "config.json").write_text(json.dumps({"auths": {registry.host: {"auth": auth}}}))
    try:
        yield registry, store, docker
    finally:
        registry.stop()
        store.stop()


def _model(tmp_path: Path, registry: RegistryProcess, name: str) -> bytes:
    src = tmp_path / name
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "bert"}')
    data = os.urandom(3 * MiB + 12345)
    (src / "model.safetensors").write_bytes(data)
    ocibridge.push(str(src), f"{registry.host}/redir/acme/{name}:latest")
    return data


def test_serve_follows_the_registry_redirect_to_storage_without_its_credentials(redirecting, tmp_path, monkeypatch):
    registry, store, docker = redirecting
    monkeypatch.setenv("DOCKER_CONFIG", str(docker))
    data = _model(tmp_path, registry, "kept")
    store.seen.clear()
    with serving([f"{registry.host}/redir"]) as served:
        got = httpx.get(f"{served.url}/acme/kept/resolve/main/model.safetensors", timeout=60)
        assert got.status_code == 200 and got.content == data
        part = httpx.get(f"{served.url}/acme/kept/resolve/main/model.safetensors", timeout=60,
                         headers={"Range": "bytes=1000-1999"})  # from serve's cache now
        assert part.status_code == 206 and part.content == data[1000:2000]
    blobs = [s for s in store.seen if "/blobs/sha256/" in s.path]
    assert blobs, "the registry sent no blob GET to the storage host"
    assert all(s.authorization is None for s in store.seen), [s for s in store.seen if s.authorization]


def test_storage_that_sends_other_bytes_is_refused(redirecting, tmp_path, monkeypatch):
    registry, store, docker = redirecting
    monkeypatch.setenv("DOCKER_CONFIG", str(docker))
    data = _model(tmp_path, registry, "bad")
    store.tamper = len(data) // 2
    weights = hashlib.sha256(data).hexdigest()
    try:
        with serving([f"{registry.host}/redir"]) as served:
            with pytest.raises(httpx.HTTPError):  # cut short, or an error: never the whole wrong file
                httpx.get(f"{served.url}/acme/bad/resolve/main/model.safetensors", timeout=60).raise_for_status()
            assert not served.blobs.cache.blobs.blob_path(f"sha256:{weights}").exists()
    finally:
        store.tamper = None
