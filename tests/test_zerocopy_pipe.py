"""A warm xorb's chunks and their 8-byte headers go to the socket through a pipe (zerocopy.py's
``_send_piped``): the file's pages spliced into it, never read into Python, and the pipe spliced
into the socket as it fills. The bytes that arrive are the xorb's, exact, for any range of it,
through a socket that is often full and a pipe smaller than a chunk; a client that leaves ends
the send with the pipe closed."""

from __future__ import annotations

import os
import random
import socket
import threading
from pathlib import Path

import pytest

from ocibridge.hubserver import zerocopy
from ocibridge.hubserver.xet import xorbs

MiB = 1 << 20


def xorb_bytes(data: bytes, k: int) -> bytes:
    """The ``k``-th xorb of ``data`` made the plain way: each chunk behind its header."""
    out = bytearray()
    for c in range(k * xorbs.XORB_CHUNKS, min(xorbs.chunk_count(len(data)), (k + 1) * xorbs.XORB_CHUNKS)):
        piece = data[c * xorbs.CHUNK:(c + 1) * xorbs.CHUNK]
        n = len(piece).to_bytes(3, "little")
        out += b"\x00" + n + b"\x00" + n + piece
    return bytes(out)


def sent_through(path: Path, segments: list[zerocopy.Segment], read_at_once: int = 7000) -> bytes:
    """What a client reading ``read_at_once`` bytes at a time receives of ``segments``."""
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # full often: the send waits on it
    ours.setblocking(False)
    got = bytearray()

    def client() -> None:
        while block := theirs.recv(read_at_once):
            got.extend(block)

    reader = threading.Thread(target=client)
    reader.start()
    fd = os.open(path, os.O_RDONLY)
    try:
        assert zerocopy.send_segments(ours, fd, segments, 10.0, threading.Event()) == zerocopy.size_of(segments)
    finally:
        os.close(fd)
        ours.close()
        reader.join(10)
    theirs.close()
    return bytes(got)


def refused(*args: object) -> int:
    raise AssertionError("the file's bytes were read into Python")


@pytest.mark.parametrize("pipe", [zerocopy.PIPE, 4096])  # 4096: a page, smaller than a chunk and its header
def test_any_range_of_a_xorb_arrives_exact_with_no_copy_into_python(tmp_path, monkeypatch, pipe):
    rng = random.Random(91)
    data = rng.randbytes(xorbs.XORB_CHUNKS * xorbs.CHUNK + 3 * xorbs.CHUNK + 777)  # a whole xorb, a short one
    path = tmp_path / "blob"
    path.write_bytes(data)
    monkeypatch.setattr(zerocopy, "PIPE", pipe)
    wanted = []
    for k in range(xorbs.xorb_count(len(data))):
        total = xorbs.xorb_size(len(data), k)
        wanted += [(k, 0, total), (k, 1, total - 1), (k, xorbs.CHUNK + 3, 3 * xorbs.CHUNK)]
        wanted += [(k, *sorted(rng.sample(range(total + 1), 2))) for _ in range(3)]
    reference = {k: xorb_bytes(data, k) for k in range(xorbs.xorb_count(len(data)))}
    with pytest.MonkeyPatch.context() as m:
        for name in ("preadv", "pread", "readv", "read"):
            m.setattr(os, name, refused)  # the copy the pipe replaced (preadv into a buffer)
        for k, start, end in wanted:
            if start == end:
                continue
            base = k * xorbs.XORB_CHUNKS
            top = min(xorbs.chunk_count(len(data)), base + xorbs.XORB_CHUNKS)
            c = base + start // (xorbs.CHUNK + xorbs.HEADER)
            segments = xorbs._segments(len(data), c, top, start % (xorbs.CHUNK + xorbs.HEADER), end - start)
            assert sent_through(path, segments) == reference[k][start:end], (k, start, end, pipe)


def test_a_client_that_leaves_ends_the_send_and_the_pipe_is_closed(tmp_path):
    data = os.urandom(8 * MiB)
    path = tmp_path / "blob"
    path.write_bytes(data)
    segments = xorbs._segments(len(data), 0, xorbs.chunk_count(len(data)), 0, 10 * MiB)
    before = len(os.listdir("/proc/self/fd"))
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    fd = os.open(path, os.O_RDONLY)
    theirs.close()  # gone before a byte was read
    try:
        with pytest.raises(zerocopy.ClientGone):
            zerocopy.send_segments(ours, fd, segments, 10.0, threading.Event())
    finally:
        os.close(fd)
        ours.close()
    assert len(os.listdir("/proc/self/fd")) == before  # the pipe's two ends closed too
