"""Large files are written in calls of at most WRITE_MAX bytes (fsutil.py says why), and the
bytes land where they belong."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from ocibridge.core.fsutil import WRITE_MAX, pwrite_all, write_sliced


class RecordingFile(io.BytesIO):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        self.calls.append(len(data))
        return super().write(data)


def test_a_large_chunk_goes_out_in_slices_and_a_small_one_whole() -> None:
    data = os.urandom(WRITE_MAX * 4 + 123)
    out = RecordingFile()
    write_sliced(out, data)
    write_sliced(out, b"tail")
    assert out.getvalue() == data + b"tail"
    assert out.calls == [WRITE_MAX] * 4 + [123, 4]


def test_pwrite_all_writes_every_byte_at_its_offset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = os.urandom(WRITE_MAX * 2 + 7)
    path = tmp_path / "blob"
    path.write_bytes(b"x" * 10)
    calls: list[int] = []
    real = os.pwrite

    def short_pwrite(fd: int, view: memoryview, offset: int) -> int:  # a write that takes part of each call
        calls.append(len(view))
        return real(fd, view[: max(1, len(view) // 2)], offset)

    monkeypatch.setattr(os, "pwrite", short_pwrite)
    fd = os.open(path, os.O_RDWR)
    try:
        pwrite_all(fd, memoryview(data), 10)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"x" * 10 + data
    assert max(calls) == WRITE_MAX


def test_writev_all_writes_every_part_in_order_through_short_writes(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts past the kernel's IOV_MAX go in several calls, and a call the kernel cuts short
    (any byte count, mid-part) goes on from where it stopped."""
    import random

    from ocibridge.core.fsutil import IOV_MAX, writev_all

    rng = random.Random(7)
    parts = [os.urandom(rng.randrange(0, 300)) for _ in range(IOV_MAX * 2 + 17)]
    real, calls = os.writev, []

    def short(fd: int, buffers: list[memoryview]) -> int:
        assert len(buffers) <= IOV_MAX
        calls.append(len(buffers))
        total = sum(len(b) for b in buffers)
        keep = rng.randrange(1, total + 1) if total else 0  # the kernel takes what it takes
        taken, cut = 0, []
        for b in buffers:
            cut.append(b[:max(0, keep - taken)])
            taken += len(cut[-1])
        return real(fd, cut)

    monkeypatch.setattr(os, "writev", short)
    path = tmp_path / "out"
    with open(path, "wb", buffering=0) as f:
        assert writev_all(f.fileno(), parts) == sum(map(len, parts))
    assert path.read_bytes() == b"".join(parts) and len(calls) > 3
