"""What one read through the mount costs in the mount's process: the FUSE loop in this
process over a file of known bytes (no registry), read by ``cat`` in a process of its own."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ocibridge.lazymount.fuseloop import THREADS, MountSession
from ocibridge.lazymount.kernelcopy import CAP_AUTO_INVAL_DATA, LAG, STEP, WholeRead
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
    conn.want = CAP_AUTO_INVAL_DATA  # (libfuse's default)
    ops.init_with_config(conn, None)
    assert ops.ready.is_set()
    assert conn.max_read == MAX_READ <= MiB - 4096 * 3 - 16
    assert bool(conn.want & CAP_SPLICE_WRITE) is capable
    # a file that never changes needs no GETATTR before a read (one after each let-go: kernelcopy)
    assert not conn.want & CAP_AUTO_INVAL_DATA


def _resident(path: Path) -> int:
    """Bytes of ``path`` in the page cache (util-linux's fincore: a mapping and ``mincore``)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    return int(out.strip())


#: a program reading the file through a shared mapping, in order: the SHA-256 of what it saw
MAPPED_READER = """
import hashlib, mmap, sys
with open(sys.argv[1], "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
    print(hashlib.sha256(m).hexdigest())
"""


def test_a_whole_read_in_order_leaves_no_second_copy_of_the_file_in_the_kernel(served, tmp_path):
    """The kernel kept every page of a mounted file a ``cat`` read (``kernel_cache``), on top of
    the layer file that holds the same bytes: a GiB read took two GiB of page cache, each page new
    to a machine just booted a host fault (docs/bench-2core-mount-4.md). Behind a whole read the
    mount lets the kernel's copy go (``lazymount.kernelcopy``); a second read, and a mapping, are
    asked again and get the same bytes."""
    ops, reads, where = served
    path = where / "weights.bin"
    kept = tmp_path / "layer"
    kept.write_bytes(_pattern(0, SIZE))
    reads.fd = os.open(kept, os.O_RDONLY)
    try:
        first = subprocess.run(["cat", str(path)], capture_output=True, check=True, timeout=120).stdout
        left = _resident(path)
        again = subprocess.run(["cat", str(path)], capture_output=True, check=True, timeout=120).stdout
        mapped = subprocess.run([sys.executable, "-c", MAPPED_READER, str(path)], capture_output=True, text=True,
                                check=True, timeout=120).stdout.strip()
    finally:
        os.close(reads.fd)
    assert first == again == _pattern(0, SIZE)
    assert mapped == hashlib.sha256(first).hexdigest()
    assert left <= LAG + STEP + 2 * MiB, left  # (main: all 64 MiB)


def test_reads_here_and_there_keep_the_kernels_copy(served, tmp_path):
    """A program that skips (safe_open: the header, then a tensor here and there) reads what it
    reads again from memory: nothing is let go."""
    ops, reads, where = served
    path = where / "weights.bin"
    kept = tmp_path / "layer"
    kept.write_bytes(_pattern(0, SIZE))
    reads.fd = os.open(kept, os.O_RDONLY)
    spots = [0, 40 * MiB, 8 * MiB, 56 * MiB, 24 * MiB, 48 * MiB]
    reader = ("import os, sys\nfd = os.open(sys.argv[1], os.O_RDONLY)\n"
              f"for at in {spots}:\n    assert len(os.pread(fd, 1 << 20, at)) == 1 << 20\n")
    try:
        subprocess.run([sys.executable, "-c", reader, str(path)], check=True, timeout=120)
    finally:
        os.close(reads.fd)
    assert _resident(path) >= len(spots) * MiB


def test_what_is_let_go_follows_a_whole_read_and_nothing_else():
    """The spans let go: behind requests that cover the file from its start, even answered out of
    order (two threads, a read-ahead's two halves), none behind a reader that skipped ahead."""
    half = MiB // 2
    whole, spans = WholeRead(), []
    for at in range(0, SIZE, MiB):  # each read-ahead's second half answered first
        spans += [s for s in (whole.asked_for(at + half, at + MiB), whole.asked_for(at, at + half)) if s]
    assert spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert spans[-1][1] == SIZE - LAG and all(end - start >= STEP for start, end in spans)
    skipping = WholeRead()
    asked = [(0, MiB), (40 * MiB, 41 * MiB), (41 * MiB, 42 * MiB), (8 * MiB, 9 * MiB), *(
        (at, at + MiB) for at in range(42 * MiB, SIZE, MiB))]
    assert [s for start, end in asked if (s := skipping.asked_for(start, end))] == []


def test_a_reader_that_comes_back_for_what_was_let_go_keeps_the_kernels_copy_after():
    """A program that maps the file and goes over it again (inference over mapped weights) has the
    first pass let go behind it, and nothing after it comes back: the second pass stays cached."""
    reader = WholeRead()
    first = [s for at in range(0, SIZE, MiB) if (s := reader.asked_for(at, at + MiB))]
    assert first and first[-1][1] == SIZE - LAG
    again = [s for at in range(0, SIZE, MiB) if (s := reader.asked_for(at, at + MiB))]
    assert again == [] and reader.settled


@pytest.mark.parametrize("through_read", [False, True])
def test_an_unpacked_files_whole_read_leaves_no_second_copy_either(tmp_path, monkeypatch, through_read):
    """A tar layer's files are unpacked to disk and answered from there: the kernel's copy of one
    read whole is let go behind the reader as a lazy file's is (``read_buf``, and ``read`` where the
    libfuse's ``read_buf`` is not known); a second read gets the same bytes; a reader that skips
    keeps its pages."""
    from ocibridge.lazymount import fuseloop as session

    if through_read:
        monkeypatch.setattr(session, "layout_known", lambda major, minor: False)
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    (unpacked / "weights.bin").write_bytes(_pattern(0, SIZE))
    (unpacked / "skipped.bin").write_bytes(_pattern(0, SIZE))
    tree = MountTree()
    tree.add_unpacked(unpacked)
    where = tmp_path / "mnt"
    where.mkdir()
    mounted = MountSession(ModelFS(tree, Known(), lambda line: None), where)
    mounted.start()
    spots = [0, 40 * MiB, 8 * MiB, 56 * MiB, 24 * MiB, 48 * MiB]
    reader = ("import os, sys\nfd = os.open(sys.argv[1], os.O_RDONLY)\n"
              f"for at in {spots}:\n    assert len(os.pread(fd, 1 << 20, at)) == 1 << 20\n")
    try:
        first = subprocess.run(["cat", str(where / "weights.bin")], capture_output=True, check=True,
                               timeout=120).stdout
        left = _resident(where / "weights.bin")
        again = subprocess.run(["cat", str(where / "weights.bin")], capture_output=True, check=True,
                               timeout=120).stdout
        subprocess.run([sys.executable, "-c", reader, str(where / "skipped.bin")], check=True, timeout=120)
        skipped = _resident(where / "skipped.bin")
    finally:
        mounted.unmount()
    assert first == again == _pattern(0, SIZE)
    assert left <= LAG + STEP + 2 * MiB, left  # (before: all 64 MiB)
    assert skipped >= len(spots) * MiB
