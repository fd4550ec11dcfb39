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
