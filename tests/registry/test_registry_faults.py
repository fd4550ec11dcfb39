"""Faults between ocibridge and a real registry, injected by the loopback fault proxy.

Each test asserts the outcome (content, what the proxy saw, what reached the destination),
not just that no exception escaped.
"""

from __future__ import annotations

import gc
import hashlib
import io
import os
import socket
import threading
import time
import uuid

import httpx
import pytest
from httpcore._backends.sync import SyncStream
from support.faultproxy import (
    corrupt,
    delay,
    drop_request,
    drop_response,
    server_error,
    too_many_requests,
    truncate,
)

from ocibridge.errors import DigestMismatch, RegistryError
from ocibridge.oci.mediatypes import OCI_CONFIG, OCI_LAYER_TAR, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.registry import RegistryStore, blobstream, download, open_repository
from ocibridge.transfer.copy import copy

SIZE = 1_000_000


def _open(target, repo: str, **options) -> RegistryStore:
    return open_repository(host=target.host, repository=repo, **options)


def _artifact(registry, tag: str = "v1") -> tuple[str, Descriptor, bytes, Descriptor]:
    """Push a config + one 1 MB random layer straight to the registry."""
    repo = f"faults/{uuid.uuid4().hex[:8]}"
    layer = os.urandom(SIZE)
    config = b'{"architecture":"amd64","os":"linux"}'
    layer_desc = Descriptor.for_bytes(OCI_LAYER_TAR, layer)
    config_desc = Descriptor.for_bytes(OCI_CONFIG, config)
    manifest = Manifest(config=config_desc, layers=[layer_desc]).to_json_bytes()
    root = Descriptor.for_bytes(OCI_MANIFEST, manifest)
    with _open(registry, repo) as store:
        store.push_blob(config_desc, io.BytesIO(config))
        store.push_blob(layer_desc, io.BytesIO(layer))
        store.push_manifest(root, manifest, tag)
    return repo, layer_desc, layer, root


def _registry_blob(registry, repo: str, digest: str) -> bytes:
    return httpx.get(f"{registry.url}/v2/{repo}/blobs/{digest}").content


def _leftovers(root) -> list:
    return [p for p in root.rglob("*") if ".ocibridge-tmp-" in p.name]


# -- downloads ----------------------------------------------------------------------------------
def test_dropped_download_resumes_with_range(registry, fault_proxy, tmp_path):
    repo, layer_desc, layer, root = _artifact(registry)
    fault_proxy.add("GET", f"/blobs/{layer_desc.digest}", drop_response(after=300_000))
    out = LayoutStore(tmp_path / "out", create=True)
    with _open(fault_proxy, repo) as src:
        copy(src, "v1", out, "v1")
        assert src.stats.download_resumes == 1
        assert src.stats.bytes_downloaded == SIZE + len(b'{"architecture":"amd64","os":"linux"}')
    gets = fault_proxy.requests_matching("GET", f"/blobs/{layer_desc.digest}")
    assert [g.range for g in gets] == [None, "bytes=300000-"]
    assert gets[0].response_bytes == 300_000 and gets[1].response_bytes == SIZE - 300_000
    assert out.blob_path(layer_desc.digest).read_bytes() == layer


def test_truncated_body_is_detected_and_resumed(registry, fault_proxy, tmp_path):
    repo, layer_desc, layer, _ = _artifact(registry)
    fault_proxy.add("GET", f"/blobs/{layer_desc.digest}", truncate(missing=1000), times=2)
    with _open(fault_proxy, repo) as src, src.open_blob(layer_desc) as reader:
        assert reader.read() == layer
    gets = fault_proxy.requests_matching("GET", f"/blobs/{layer_desc.digest}")
    assert [g.range for g in gets] == [None, f"bytes={SIZE - 1000}-", f"bytes={SIZE - 1000}-"]
    assert [g.action for g in gets] == ["truncate", "truncate", None]


def test_corrupted_bytes_rejected_and_nothing_written(registry, fault_proxy, tmp_path):
    repo, layer_desc, _, root = _artifact(registry)
    fault_proxy.add("GET", f"/blobs/{layer_desc.digest}", corrupt(offset=12345), times=None)
    out = LayoutStore(tmp_path / "out", create=True)
    with _open(fault_proxy, repo) as src, pytest.raises(DigestMismatch):
        copy(src, "v1", out, "v1")
    assert not out.blob_path(layer_desc.digest).exists()
    assert not out.blob_path(root.digest).exists()
    assert out.tags() == []
    assert _leftovers(out.root) == []
    assert fault_proxy.requests_matching("GET", f"/blobs/{layer_desc.digest}")[0].action == "corrupt"


def test_corrupted_manifest_rejected(registry, fault_proxy):
    repo, _, _, root = _artifact(registry)
    fault_proxy.add("GET", f"/manifests/{root.digest}", corrupt(offset=3), times=None)
    with _open(fault_proxy, repo) as src, pytest.raises(DigestMismatch):
        src.fetch_bytes(root)


# -- downloads: the prefetch thread and socket reads -------------------------------------------
@pytest.mark.parametrize("fault", [drop_response(after=300_000), truncate(missing=1000)])
def test_socket_read_resumes_after_a_cut(registry, fault_proxy, monkeypatch, fault):
    """Big bodies are read off the socket, not through h11: cuts still resume with Range."""
    monkeypatch.setattr(blobstream, "DIRECT_MIN", 0)
    sizes = []
    read = SyncStream.read

    def spy(self, max_bytes, timeout=None):
        sizes.append(max_bytes)
        return read(self, max_bytes, timeout)

    monkeypatch.setattr(SyncStream, "read", spy)
    repo, layer_desc, layer, _ = _artifact(registry)
    fault_proxy.add("GET", f"/blobs/{layer_desc.digest}", fault)
    with _open(fault_proxy, repo) as src, src.open_blob(layer_desc) as reader:
        assert reader.read() == layer
        assert src.stats.download_resumes == 1
    assert max(sizes) > 65536  # httpcore alone reads 64 KiB at a time
    gets = fault_proxy.requests_matching("GET", f"/blobs/{layer_desc.digest}")
    cut = 300_000 if fault.name == "drop_response" else SIZE - 1000
    assert [g.range for g in gets] == [None, f"bytes={cut}-"]


def test_socket_read_of_corrupt_bytes_is_rejected(registry, fault_proxy, monkeypatch, tmp_path):
    monkeypatch.setattr(blobstream, "DIRECT_MIN", 0)
    repo, layer_desc, _, _ = _artifact(registry)
    fault_proxy.add("GET", f"/blobs/{layer_desc.digest}", corrupt(offset=SIZE - 1), times=None)
    out = LayoutStore(tmp_path / "out", create=True)
    with _open(fault_proxy, repo) as src, pytest.raises(DigestMismatch):
        copy(src, "v1", out, "v1")
    assert not out.blob_path(layer_desc.digest).exists()
    assert _leftovers(out.root) == []


def test_socket_read_into_sets_the_read_timeout_once_a_body(registry, monkeypatch):
    """A body received off the socket straight into the caller's memory reads under the read
    timeout, set on the socket once (each setting is a system call), not once a read."""
    monkeypatch.setattr(blobstream, "DIRECT_MIN", 0)
    settings, read_under, received = [], [], []
    settimeout, recv_into = socket.socket.settimeout, socket.socket.recv_into

    def setting(self, value):
        settings.append(value)
        return settimeout(self, value)

    def receiving(self, *args):
        read_under.append(self.gettimeout())
        n = recv_into(self, *args)
        received.append(n)
        return n

    repo, layer_desc, layer, _ = _artifact(registry)
    monkeypatch.setattr(socket.socket, "settimeout", setting)
    monkeypatch.setattr(socket.socket, "recv_into", receiving)
    got = bytearray(SIZE)
    view = memoryview(got)
    with _open(registry, repo, read_timeout=7.0) as src:
        reader = src.open_blob_range(layer_desc, 0, SIZE)
        at = 0
        while at < SIZE:
            n = reader.readinto(view[at:at + 16384])
            assert n
            at += n
        reader.close()
    assert bytes(got) == layer
    # what came with the headers was read by h11 (one 64 KiB read at most); the rest off the socket
    assert sum(received) >= SIZE - 65536 and set(read_under) == {7.0}
    assert len(settings) < 10


def _blob_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("blob-")]


@pytest.mark.parametrize("direct_min", [0, 1 << 40], ids=["socket", "h11"])
def test_close_stops_a_download_blocked_on_the_network(stalling_server, monkeypatch, direct_min):
    monkeypatch.setattr(blobstream, "DIRECT_MIN", direct_min)
    desc = Descriptor(mediaType=OCI_LAYER_TAR, digest="sha256:" + "1" * 64, size=50_000_000)
    # a read timeout longer than the suite's: a close that waited for the network would hang here
    with open_repository(host=stalling_server, repository="stall", read_timeout=3600) as store:
        reader = store.open_blob(desc)
        assert len(reader.read(400_000)) == 400_000
        time.sleep(0.2)  # the thread has taken what was sent and waits for more
        reader.close()
    assert _blob_threads() == []


def test_unclosed_reader_does_not_leave_its_thread_behind(registry, monkeypatch):
    monkeypatch.setattr(blobstream, "PIECE", 65536)
    monkeypatch.setattr(download, "PREFETCH_PIECES", 1)
    repo, layer_desc, layer, _ = _artifact(registry)
    with _open(registry, repo) as src:
        reader = src.open_blob(layer_desc)
        assert reader.read(1000) == layer[:1000]
        assert _blob_threads()  # receiving and hashing threads, blocked: nobody reads
        del reader
        gc.collect()
        deadline = time.monotonic() + 2.0
        while _blob_threads() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _blob_threads() == []


# -- retries --------------------------------------------------------------------------------------
def test_429_retry_after_is_honoured(registry, fault_proxy):
    repo, _, _, root = _artifact(registry)
    fault_proxy.add("HEAD", "/manifests/v1", too_many_requests(retry_after=1), times=2)
    with _open(fault_proxy, repo) as src:
        start = time.monotonic()
        assert src.resolve("v1").digest == root.digest
        elapsed = time.monotonic() - start
        assert src.stats.retries == 2
    assert elapsed >= 2.0
    heads = fault_proxy.requests_matching("HEAD", "/manifests/v1")
    assert [h.action for h in heads] == ["status", "status", None]  # two 429s, then forwarded


def test_429_gives_up_after_bounded_retries(registry, fault_proxy):
    repo, _, _, _ = _artifact(registry)
    fault_proxy.add("HEAD", "/manifests/v1", too_many_requests(retry_after=0), times=None)
    with _open(fault_proxy, repo, max_retries=3) as src, pytest.raises(RegistryError) as err:
        src.resolve("v1")
    assert err.value.status == 429
    assert len(fault_proxy.requests_matching("HEAD", "/manifests/v1")) == 4


def test_burst_of_500s_then_success(registry, fault_proxy, tmp_path):
    repo, layer_desc, layer, _ = _artifact(registry)
    fault_proxy.add("GET", f"/blobs/{layer_desc.digest}", server_error(500), times=3)
    with _open(fault_proxy, repo, backoff_base=0.05) as src, src.open_blob(layer_desc) as r:
        assert r.read() == layer
    gets = fault_proxy.requests_matching("GET", f"/blobs/{layer_desc.digest}")
    assert [g.status for g in gets] == [500, 500, 500, 200]


def test_no_retry_on_other_4xx(registry, fault_proxy):
    repo, _, _, _ = _artifact(registry)
    fault_proxy.add("GET", "/manifests/", server_error(400) , times=None)
    with _open(fault_proxy, repo) as src, pytest.raises(RegistryError) as err:
        src.fetch_bytes(Descriptor(mediaType=OCI_MANIFEST, digest="sha256:" + "2" * 64, size=2))
    assert err.value.status == 400 and err.value.code == "UNKNOWN"
    assert len(fault_proxy.requests_matching("GET", "/manifests/")) == 1


def test_read_timeout_is_retried(registry, fault_proxy):
    repo, _, _, root = _artifact(registry)
    fault_proxy.add("HEAD", "/manifests/v1", delay(1.5))
    with _open(fault_proxy, repo, read_timeout=0.5, backoff_base=0.05) as src:
        assert src.resolve("v1").digest == root.digest
        assert src.stats.retries == 1


# -- uploads --------------------------------------------------------------------------------------
class _Counting(io.BytesIO):
    """A seekable source that counts how often it was rewound."""

    seeks = 0

    def seek(self, *a):
        self.seeks += 1
        return super().seek(*a)


class _OneShot:
    """A source that can only be read forward (like a pipe)."""

    def __init__(self, data: bytes):
        self._raw = io.BytesIO(data)

    def read(self, n=-1):
        return self._raw.read(n)

    def close(self):
        pass


def test_dropped_monolithic_upload_recovers(registry, fault_proxy):
    data = os.urandom(SIZE)
    desc = Descriptor.for_bytes(OCI_LAYER_TAR, data)
    repo = f"faults/{uuid.uuid4().hex[:8]}"
    fault_proxy.add("PUT", "/blobs/uploads/", drop_request(after=400_000))
    source = _Counting(data)
    with _open(fault_proxy, repo, backoff_base=0.05) as dst:
        dst.push_blob(desc, source)
        assert dst.stats.upload_resumes + dst.stats.upload_restarts == 1
        assert dst.stats.blobs_uploaded == 1
    puts = fault_proxy.requests_matching("PUT", "/blobs/uploads/")
    assert [p.action for p in puts] == ["drop_request", None]
    assert puts[0].request_bytes == 400_000
    assert source.seeks >= 1
    assert hashlib.sha256(_registry_blob(registry, repo, desc.digest)).hexdigest() == desc.digest[7:]


def test_dropped_chunk_resumes_from_registry_offset(registry, fault_proxy):
    """The second PATCH dies before the registry gets any of it: continue at the registry's
    offset (asked with GET on the upload URL), re-opening the source there."""
    data = os.urandom(SIZE)
    desc = Descriptor.for_bytes(OCI_LAYER_TAR, data)
    repo = f"faults/{uuid.uuid4().hex[:8]}"
    chunk = 256 * 1024
    fault_proxy.add("PATCH", "/blobs/uploads/", drop_request(after=1000, forward=False), skip=1)
    opened = []

    def reopen():
        opened.append(1)
        return _OneShot(data)

    with _open(fault_proxy, repo, chunk_size=chunk, backoff_base=0.05) as dst:
        dst.push_blob(desc, reopen(), reopen=reopen)
        assert dst.stats.upload_resumes == 1 and dst.stats.upload_restarts == 0
        # everything but the lost 1000-byte piece of chunk two went up once
        assert dst.stats.bytes_uploaded <= SIZE + chunk
    status_checks = fault_proxy.requests_matching("GET", "/blobs/uploads/")
    assert len(status_checks) == 1
    patches = fault_proxy.requests_matching("PATCH", "/blobs/uploads/")
    # streamed chunks of --chunk-size (they can end early at a Ctrl-C): the second, cut before
    # it reached the registry, went again whole from the registry's offset
    assert [p.content_range for p in patches] == [None] * len(patches)
    assert [p.request_bytes for p in patches][:3] == [chunk, 1000, chunk]
    assert len(opened) == 2
    assert hashlib.sha256(_registry_blob(registry, repo, desc.digest)).hexdigest() == desc.digest[7:]


def test_upload_without_rewindable_source_fails_cleanly(registry, fault_proxy):
    data = os.urandom(SIZE)
    desc = Descriptor.for_bytes(OCI_LAYER_TAR, data)
    repo = f"faults/{uuid.uuid4().hex[:8]}"
    fault_proxy.add("PUT", "/blobs/uploads/", drop_request(after=400_000), times=None)
    with _open(fault_proxy, repo, backoff_base=0.05) as dst, pytest.raises(RegistryError) as err:
        dst.push_blob(desc, _OneShot(data))
    assert "cannot be read again" in str(err.value)
    assert httpx.head(f"{registry.url}/v2/{repo}/blobs/{desc.digest}").status_code == 404


def test_upload_5xx_restarts_and_repush_is_free(registry, fault_proxy, tmp_path):
    repo, layer_desc, layer, root = _artifact(registry)
    layout = LayoutStore(tmp_path / "l", create=True)
    with _open(registry, repo) as src:
        copy(src, "v1", layout, "v1")
    new_repo = f"faults/{uuid.uuid4().hex[:8]}"
    fault_proxy.add("PUT", "/blobs/uploads/", server_error(503), times=1)
    with _open(fault_proxy, new_repo, backoff_base=0.05) as dst:
        with open(layout.blob_path(layer_desc.digest), "rb") as f:
            dst.push_blob(layer_desc, f)
        assert dst.stats.upload_restarts + dst.stats.upload_resumes == 1
    with _open(fault_proxy, new_repo) as dst:
        copy(layout, "v1", dst, "v1")
        assert dst.stats.bytes_uploaded < 100  # only the config: the layer was already there
        assert dst.stats.blobs_skipped >= 0
    assert _registry_blob(registry, new_repo, layer_desc.digest) == layer


def test_413_on_monolithic_put_falls_back_to_chunks(registry, fault_proxy):
    data = os.urandom(SIZE)
    desc = Descriptor.for_bytes(OCI_LAYER_TAR, data)
    repo = f"faults/{uuid.uuid4().hex[:8]}"
    fault_proxy.add("PUT", "/blobs/uploads/.*digest=", server_error(413))
    with _open(fault_proxy, repo, backoff_base=0.05) as dst:
        dst.push_blob(desc, io.BytesIO(data))
    patches = fault_proxy.requests_matching("PATCH", "/blobs/uploads/")
    assert [p.request_bytes for p in patches] == [500_000, 500_000]  # half the refused body
    assert _registry_blob(registry, repo, desc.digest) == data


def test_corrupt_source_between_registries_commits_nothing(registry, registry2, fault_proxy):
    """Registry to registry: the bad byte is caught while the PUT is still open."""
    repo, layer_desc, _, _ = _artifact(registry)
    fault_proxy.add("GET", f"/blobs/{layer_desc.digest}", corrupt(offset=999_999), times=None)
    with _open(fault_proxy, repo) as src, _open(registry2, repo) as dst, \
         pytest.raises(DigestMismatch):
        copy(src, "v1", dst, "v1")
    assert httpx.head(f"{registry2.url}/v2/{repo}/blobs/{layer_desc.digest}").status_code == 404
    assert httpx.head(f"{registry2.url}/v2/{repo}/manifests/v1").status_code == 404
