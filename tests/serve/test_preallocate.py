"""Disk blocks taken for a file before it is written (core/preallocate.py): the size stays as
written, and where there is no such call (a pipe) nothing fails."""

from __future__ import annotations

import os
import sys

import pytest

from ocibridge.core.preallocate import take_blocks


@pytest.mark.skipif(sys.platform != "linux", reason="fallocate is Linux's")
def test_blocks_are_taken_and_the_size_is_what_was_written(tmp_path):
    path = tmp_path / "f"
    with open(path, "wb", buffering=0) as f:
        assert take_blocks(f.fileno(), 8 * 1024 * 1024)
        st = os.fstat(f.fileno())
        assert st.st_size == 0 and st.st_blocks * 512 >= 8 * 1024 * 1024
        f.write(b"x" * 1000)
    assert path.read_bytes() == b"x" * 1000


def test_nothing_fails_where_blocks_cannot_be_taken():
    r, w = os.pipe()
    try:
        assert take_blocks(w, 1024) is False
        assert take_blocks(w, 0) is False
    finally:
        os.close(r)
        os.close(w)
