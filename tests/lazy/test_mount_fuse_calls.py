"""What one read through the mount costs in the mount's process: the FUSE loop in this
process over a file of known bytes (no registry), read by ``cat`` in a process of its own."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ocibridge.lazymount.fuseloop import THREADS, MountSession
from ocibridge.lazymount.ops import ModelFS
from ocibridge.lazymount.readahead import READ_AHEAD_KB, read_ahead_file
from ocibridge.lazymount.replies import CAP_SPLICE_WRITE, MAX_READ
from ocibridge.lazymount.tree import LazyFile, MountTree

MiB = 1024 * 1024
SIZE = 64 * MiB


def _pattern(start: int, end: int) -> bytes:
    """Bytes whose value says where they are (each 4 KiB block its number, mod 251)."""
    out = bytearray()
    at = start
    while at < end:
        block = at // 4096
        upto = min(end, (block + 1) * 4096)
        out += bytes([block % 251]) * (upto - at)
        at = upto
    return bytes(out)


class Known:
    """A LazyReads whose file is ``_pattern``; counts its reads. With ``fd`` (a file holding the
    pattern) every read is answered by that descriptor; with ``fails``, every read fails."""

    def __init__(self) -> None:
        self.reads = 0
        self.fd: int | None = None
        self.fails = False

    def read_file(self, file: LazyFile, start: int, end: int) -> bytes:
        self.reads += 1
        return _pattern(start, end)  # (``read``: a libfuse whose read_buf is not known)

    def read_into(self, file: LazyFile, start: int, end: int, into: memoryview) -> None:
        assert self.fd is None  # (answered by the descriptor, never read here)
        self.reads += 1
        into[:] = _pattern(start, end)

    def stable_fd(self, file: LazyFile, start: int, end: int) -> int | None:
        if self.fails:
            raise OSError("the registry sent another byte")
        return self.fd


@pytest.fixture
def served(tmp_path: Path):
    tree = MountTree()
    tree.add_lazy("weights.bin", SIZE, 0o644)
    reads = Known()
    ops = ModelFS(tree, reads, lambda line: None)
    where = tmp_path / "mnt"
    where.mkdir()
    session = MountSession(ops, where)
    session.start()
    try:
        yield ops, reads, where
    finally:
        session.unmount()


def test_the_binding_threads_keep_their_python_thread_state(served):
    """libfuse's threads call in through ctypes: a thread state made per call was a 16 KiB
    mmap and munmap and a thread state set up and torn down per read; one per thread now."""
    ops, reads, where = served
    got = subprocess.run(["cat", str(where / "weights.bin")], capture_output=True, check=True, timeout=120).stdout
    assert got == _pattern(0, SIZE)
    assert reads.reads >= 64  # (64 MiB in reads of at most 1 MiB)
    assert 1 <= ops.thread_states <= THREADS + 2


def test_verified_bytes_in_a_stable_file_are_answered_by_its_descriptor(served, tmp_path):
    """libfuse reads them itself (``read_buf``): no read of them in Python."""
    ops, reads, where = served
    assert _cat_from_a_kept_layer(reads, where, tmp_path) == _pattern(0, SIZE)
    assert reads.reads == 0


def _cat_from_a_kept_layer(reads, where, tmp_path) -> bytes:
    """``cat`` of the mounted file while its verified bytes sit in a stable file (answered by
    its descriptor)."""
    kept = tmp_path / "layer"
    kept.write_bytes(_pattern(0, SIZE))
    reads.fd = os.open(kept, os.O_RDONLY)
    try:
        return subprocess.run(["cat", str(where / "weights.bin")], capture_output=True, check=True,
                              timeout=120).stdout
    finally:
        os.close(reads.fd)


def test_a_read_that_fails_is_eio_and_no_byte(served):
    ops, reads, where = served
    reads.fails = True
    done = subprocess.run(["cat", str(where / "weights.bin")], capture_output=True, timeout=120)
    assert done.returncode != 0 and done.stdout == b""
    assert b"Input/output error" in done.stderr


def test_a_libfuse_whose_read_buf_is_not_known_is_answered_through_read(tmp_path, monkeypatch):
    """``lazymount.replies`` writes libfuse 3.0-3.16's ``struct fuse_bufvec``: with another
    libfuse the binding is not given ``read_buf`` and calls ``read``."""
    from ocibridge.lazymount import fuseloop as session

    monkeypatch.setattr(session, "layout_known", lambda major, minor: False)
    tree = MountTree()
    tree.add_lazy("weights.bin", SIZE, 0o644)
    reads = Known()
    reads.fails = True  # (read_buf would ask stable_fd, which fails: EIO)
    where = tmp_path / "mnt"
    where.mkdir()
    mounted = MountSession(ModelFS(tree, reads, lambda line: None), where)
    mounted.start()
    try:
        got = subprocess.run(["cat", str(where / "weights.bin")], capture_output=True, check=True,
                             timeout=120).stdout
    finally:
        mounted.unmount()
    assert got == _pattern(0, SIZE)
    assert reads.reads >= 64


def test_a_sequential_read_asks_512_kib_at_a_time_where_the_mount_may_raise_its_read_ahead(served, tmp_path):
    """The kernel asks a FUSE file system for at most its device's read-ahead at a time (128
    KiB; 256 KiB requests for ``cat``); each request costs a call into Python, two system calls
    and a thread hand-off whatever its size. The mount raises its own device's read-ahead to
    1 MiB, two reads of ``replies.MAX_READ`` (what a spliced reply may carry, half a chunk),
    where it may (root; ``lazymount.readahead``): 64 MiB in about 128 requests, not 256.
    Elsewhere the kernel's setting stays, and the reads are answered all the same. Either way
    no request straddles two 1 MiB chunks (a first read would wait for the chunk after its own)."""
    ops, reads, where = served
    setting = read_ahead_file(where)
    assert setting is not None and setting.parent.name.startswith("0:")
    kb = int(setting.read_text())
    asked: list[int] = []
    spans: list[tuple[int, int]] = []
    given = reads.stable_fd

    def noted(file: LazyFile, start: int, end: int) -> int | None:
        asked.append(end - start)
        spans.append((start, end))
        return given(file, start, end)

    reads.stable_fd = noted  # type: ignore[method-assign]
    assert _cat_from_a_kept_layer(reads, where, tmp_path) == _pattern(0, SIZE)
    assert [(s, e) for s, e in spans if s // MiB != (e - 1) // MiB] == []
    if os.geteuid() == 0:
        assert kb == READ_AHEAD_KB
        assert max(asked) == MAX_READ and len(asked) <= SIZE // MAX_READ + 8, (len(asked), max(asked))
    else:  # (not root: the kernel's read-ahead stays, 128 KiB)
        assert kb < READ_AHEAD_KB and max(asked) < MiB


@pytest.mark.parametrize("capable", [True, False])
def test_the_mount_asks_libfuse_to_splice_replies_of_reads_that_fit_a_pipe(capable):
    """A reply given by descriptor is spliced (the file's pages into a pipe, copied once by the
    kernel into the reply) where the kernel can; its pipe must hold the reply and its header,
    so a read asks at most MAX_READ, which fits the 1 MiB a pipe grows to without privilege."""
    import mfusepy

    ops = ModelFS(MountTree(), Known(), lambda line: None)
    conn = mfusepy.fuse_conn_info()
    conn.capable = CAP_SPLICE_WRITE if capable else 0
    ops.init_with_config(conn, None)
    assert ops.ready.is_set()
    assert conn.max_read == MAX_READ <= MiB - 4096 * 3 - 16
    assert bool(conn.want & CAP_SPLICE_WRITE) is capable
