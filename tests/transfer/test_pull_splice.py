"""Blobs spliced from the socket into their file (issue 64): a plain-HTTP body read off its
socket is moved into the partial file inside the kernel and hashed from the file, with every
check of the ordinary path kept: drops and short bodies resumed with Range, a server that
ignores Range, corrupt bytes refused with nothing left behind, parts out of order, a file
system that refuses spliced pages, and Ctrl-C. Real registry, through the fault proxy."""

from __future__ import annotations

import errno
import io
import os
import ssl
import stat
import threading
import time

import pytest
from support.faultproxy import corrupt, drop_response, ignore_range, truncate

from ocibridge.core import interrupt
from ocibridge.errors import DigestMismatch
from ocibridge.oci.mediatypes import OCI_LAYER_TAR
from ocibridge.oci.models import Descriptor
from ocibridge.stores import partial
from ocibridge.stores.layout import LayoutStore
from ocibridge.stores.partial import PARTIAL_PREFIX, partial_path
from ocibridge.stores.ranged import RangedPlan
from ocibridge.stores.registry import blobstream, open_repository

SIZE = 3_000_017  # several pipes' worth, not a multiple of anything
PART = 512 * 1024


@pytest.fixture
def spliced(monkeypatch) -> list[int]:
    """Bodies of any size are read off the socket (the bench's 1 GiB blobs are; these are
    small); the bytes each splice put into a regular file, in order."""
    monkeypatch.setattr(blobstream, "DIRECT_MIN", 0)
    into_files: list[int] = []
    real = os.splice

    def spy(src: int, dst: int, count: int, offset_src=None, offset_dst=None, flags=0) -> int:
        n = real(src, dst, count, offset_src, offset_dst, flags)
        if stat.S_ISREG(os.fstat(dst).st_mode):
            into_files.append(n)
        return n

    monkeypatch.setattr(os, "splice", spy)
    return into_files


def _blob(registry, repo: str, **options) -> tuple[Descriptor, bytes]:
    data = os.urandom(SIZE)
    desc = Descriptor.for_bytes(OCI_LAYER_TAR, data)
    with open_repository(host=registry.host, repository=repo, **options) as store:
        store.push_blob(desc, io.BytesIO(data))
    return desc, data


def _download(proxy, repo: str, desc: Descriptor, layout_dir, **options) -> LayoutStore:
    dst = LayoutStore(layout_dir, create=True)
    with open_repository(host=proxy.host, repository=repo, **options) as src:
        dst.download_blob(desc, src)
    return dst


def _gets(proxy, desc: Descriptor):
    return sorted(proxy.requests_matching("GET", f"/blobs/{desc.digest}"), key=lambda g: g.time)


def _no_partials(layout: LayoutStore) -> bool:
    blobs = layout.root / "blobs" / "sha256"
    return not [p for p in blobs.iterdir() if p.name.startswith(PARTIAL_PREFIX)]


def test_a_plain_http_blob_is_spliced_into_its_file(registry, fault_proxy, unique_repo, tmp_path, spliced):
    desc, data = _blob(registry, unique_repo)
    dst = _download(fault_proxy, unique_repo, desc, tmp_path / "l")
    assert dst.blob_path(desc.digest).read_bytes() == data
    # all but what the HTTP parser had read with the headers went through the kernel
    assert sum(spliced) > SIZE - 256 * 1024
    assert _no_partials(dst)


@pytest.mark.parametrize("fault", [drop_response(after=1_000_000), truncate(missing=1000)],
                         ids=["dropped", "short"])
def test_a_cut_spliced_body_resumes_with_range(registry, fault_proxy, unique_repo, tmp_path, spliced, fault):
    desc, data = _blob(registry, unique_repo)
    fault_proxy.add("GET", f"/blobs/{desc.digest}", fault)
    dst = _download(fault_proxy, unique_repo, desc, tmp_path / "l")
    assert dst.blob_path(desc.digest).read_bytes() == data
    cut = 1_000_000 if fault.name == "drop_response" else SIZE - 1000
    assert [g.range for g in _gets(fault_proxy, desc)] == [None, f"bytes={cut}-"]
    assert sum(spliced) > SIZE - 512 * 1024  # the resumed body was spliced too


def test_corrupt_spliced_bytes_are_refused_and_nothing_is_left(registry, fault_proxy, unique_repo, tmp_path,
                                                               spliced):
    desc, _ = _blob(registry, unique_repo)
    fault_proxy.add("GET", f"/blobs/{desc.digest}", corrupt(offset=SIZE - 7), times=None)
    with pytest.raises(DigestMismatch):
        _download(fault_proxy, unique_repo, desc, tmp_path / "l")
    assert spliced
    layout = LayoutStore(tmp_path / "l")
    assert not layout.blob_path(desc.digest).exists()
    assert _no_partials(layout)


def test_a_resume_the_server_answers_whole_drops_what_is_kept(registry, fault_proxy, unique_repo, tmp_path,
                                                              spliced):
    """A partial file from an earlier run, and a server that ignores Range: the whole body
    comes again, the bytes already held are dropped, not written twice or spliced past."""
    desc, data = _blob(registry, unique_repo)
    layout = LayoutStore(tmp_path / "l", create=True)
    kept = 1_234_567
    partial_path(layout.root / "blobs" / "sha256", desc.digest).write_bytes(data[:kept])
    fault_proxy.add("GET", f"/blobs/{desc.digest}", ignore_range(), times=None)
    _download(fault_proxy, unique_repo, desc, tmp_path / "l")
    assert layout.blob_path(desc.digest).read_bytes() == data
    assert [(g.range, g.status) for g in _gets(fault_proxy, desc)] == [(f"bytes={kept}-", 200)]
    assert _no_partials(layout)


def test_parts_spliced_out_of_order_are_hashed_from_the_file(registry, fault_proxy, unique_repo, tmp_path,
                                                              spliced):
    desc, data = _blob(registry, unique_repo)
    dst = _download(fault_proxy, unique_repo, desc, tmp_path / "l", part_size=PART, parts_in_flight=4)
    assert dst.blob_path(desc.digest).read_bytes() == data
    assert len(_gets(fault_proxy, desc)) == -(-SIZE // PART)  # one request per part
    assert sum(spliced) > SIZE - 6 * 256 * 1024


def test_a_file_system_that_refuses_spliced_pages_gets_them_written(registry, fault_proxy, unique_repo,
                                                                    tmp_path, monkeypatch):
    monkeypatch.setattr(blobstream, "DIRECT_MIN", 0)
    refused: list[int] = []
    real = os.splice

    def refusing(src: int, dst: int, count: int, offset_src=None, offset_dst=None, flags=0) -> int:
        if stat.S_ISREG(os.fstat(dst).st_mode):
            refused.append(count)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(src, dst, count, offset_src, offset_dst, flags)

    monkeypatch.setattr(os, "splice", refusing)
    desc, data = _blob(registry, unique_repo)
    dst = _download(fault_proxy, unique_repo, desc, tmp_path / "l")
    assert dst.blob_path(desc.digest).read_bytes() == data
    assert len(refused) == 1  # asked once, then never again on that connection


def test_ctrl_c_stops_a_spliced_download_at_once_and_keeps_its_bytes(stalling_server, tmp_path, spliced):
    desc = Descriptor(mediaType=OCI_LAYER_TAR, digest="sha256:" + "2" * 64, size=50_000_000)
    final = tmp_path / "blobs" / desc.digest[7:]
    failed: list[BaseException] = []

    def pull() -> None:
        try:
            with open_repository(host=stalling_server, repository="stall", read_timeout=30) as store:
                partial.download(final, desc, store, RangedPlan(parts_in_flight=1))
        except BaseException as e:  # noqa: BLE001 - asserted below
            failed.append(e)

    worker = threading.Thread(target=pull)
    worker.start()
    held = partial_path(final.parent, desc.digest)
    deadline = time.monotonic() + 20
    while not (held.exists() and held.stat().st_size >= 3_000_000):
        assert time.monotonic() < deadline and not failed, f"the stalled download never received its 3 MB: {failed}"
        time.sleep(0.05)
    try:
        interrupt.cancel_all()  # what the first Ctrl-C does
        worker.join(60)  # (the stalled server never sends the rest: only the cancel ends it)
    finally:
        interrupt.reset()
    assert not worker.is_alive()
    assert failed and isinstance(failed[0], interrupt.Interrupted)
    assert sum(spliced) >= 2_500_000  # the bytes came through the kernel
    assert held.stat().st_size == 3_000_000 and not final.exists()  # kept for a resume


# -- TLS: decrypted straight into the buffer, never spliced ------------------------------------
def test_a_tls_body_is_decrypted_into_the_buffers_not_spliced(tls_registry, unique_repo, tmp_path, spliced,
                                                             monkeypatch):
    received: list[int] = []
    real = ssl.SSLSocket.recv_into

    def spy(self, buffer, nbytes=0, flags=0):
        n = real(self, buffer, nbytes, flags)
        received.append(n)
        return n

    monkeypatch.setattr(ssl.SSLSocket, "recv_into", spy)
    options = {"ca_file": str(tls_registry.ca_file)}
    desc, data = _blob(tls_registry, unique_repo, **options)
    dst = _download(tls_registry, unique_repo, desc, tmp_path / "l", **options)
    assert dst.blob_path(desc.digest).read_bytes() == data
    assert sum(received) > SIZE - 256 * 1024  # all but what h11 read with the headers
    assert not spliced  # the socket carries ciphertext: nothing of it may go to the file


def test_a_tls_body_read_as_pieces_asks_a_record_at_a_time(tls_registry, unique_repo, spliced, monkeypatch):
    """A prefetched read (open_blob) takes bytes from the TLS stream: each read asks little,
    since a read returns one record but first allocates what it was asked."""
    asked: list[int] = []
    real = ssl.SSLSocket.recv

    def spy(self, buflen=1024, flags=0):
        asked.append(buflen)
        return real(self, buflen, flags)

    monkeypatch.setattr(ssl.SSLSocket, "recv", spy)
    options = {"ca_file": str(tls_registry.ca_file)}
    desc, data = _blob(tls_registry, unique_repo, **options)
    with open_repository(host=tls_registry.host, repository=unique_repo, **options) as src, \
            src.open_blob(desc) as reader:
        assert reader.read() == data
    assert asked and max(asked) <= blobstream.TLS_READ
