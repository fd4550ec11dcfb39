"""What a warm Xet read costs serve is mostly its sends and its requests (issue 91): a xorb's
chunks and their 8-byte headers go to the socket through a pipe by splice (the file's pages by
reference, not read into a buffer and copied out again), a file system that refuses splice gets
them gathered as before, and a GiB is 16 requests of hf_xet (64 MiB xorbs), not 64."""

from __future__ import annotations

import errno
import os
import socket
import threading
from pathlib import Path

import pytest

from ocibridge.hubserver import zerocopy
from ocibridge.hubserver.xet import xorbs

MiB = 1 << 20


def _sent(path: Path, segments: list[zerocopy.Segment]) -> bytes:
    """What ``send_segments`` puts on a socket whose reader takes it as it comes (a small send
    buffer: the socket fills again and again, and the sender waits on it)."""
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    ours.setblocking(False)
    got = bytearray()

    def read() -> None:
        while chunk := theirs.recv(256 * 1024):
            got.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    fd = os.open(path, os.O_RDONLY)
    try:
        count = zerocopy.send_segments(ours, fd, segments, 10.0, threading.Event())
    finally:
        os.close(fd)
        ours.close()
        reader.join(10)
        theirs.close()
    assert count == len(got)
    return bytes(got)


def _expected(data: bytes, segments: list[zerocopy.Segment]) -> bytes:
    return b"".join(head + data[offset:offset + count] for head, offset, count in segments)


@pytest.fixture
def weights(tmp_path: Path) -> tuple[Path, bytes]:
    data = os.urandom(3 * MiB + 12345)  # past one pipe's 1 MiB: the pipe fills and drains mid-xorb
    path = tmp_path / "w.bin"
    path.write_bytes(data)
    return path, data


def test_xorb_chunks_and_headers_go_through_a_pipe_not_a_buffer(weights, monkeypatch):
    """The chunks of a xorb range that starts inside a header and ends inside a chunk arrive
    exact, and no byte of the file was read into the process (no preadv)."""
    path, data = weights
    size = len(data)
    segments = xorbs._segments(size, xorbs.ISSUED, 0, xorbs.ISSUED.chunk_count(size), 3, size + 400 - 3 - 100)

    def no_read(*args: object) -> int:
        raise AssertionError("the file's bytes were read into a buffer")

    monkeypatch.setattr(os, "preadv", no_read)
    assert segments[0][0] == xorbs._header(xorbs.XET_CHUNK)[3:]  # the first header cut
    assert _sent(path, segments) == _expected(data, segments)


def test_a_file_system_that_refuses_splice_gets_the_bytes_gathered(weights, monkeypatch):
    """splice(2) refused with EINVAL (a file system without it) before a byte went: the same
    bytes, gathered by preadv and sent."""
    path, data = weights
    size = len(data)
    chunks = xorbs.ISSUED.chunk_count(size)
    segments = xorbs._segments(size, xorbs.ISSUED, 0, chunks, 0, size + 8 * chunks)
    tried: list[int] = []

    def refused(*args: object, **kwargs: object) -> int:
        tried.append(1)
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(os, "splice", refused)
    assert _sent(path, segments) == _expected(data, segments)
    assert tried  # splice was asked first


def test_a_gib_is_sixteen_xorb_requests_of_at_most_64_mib_of_data():
    """Each xorb is a request of hf_xet (and a connection while it is under way): 64 MiB of the
    file each, the Hub's largest, so a GiB is 16 requests."""
    gib = 1 << 30
    answer = xorbs.reconstruction("0" * 64, gib, xorbs.ISSUED, 0, gib, lambda k: f"/x/{k}", version=1)
    assert len(answer["terms"]) == 16
    assert all(term["unpacked_length"] == 64 * MiB for term in answer["terms"])
    assert xorbs.xorb_size(gib, xorbs.ISSUED, 0) == 64 * MiB + 8 * xorbs.XORB_CHUNKS
