"""bench.fusefloor: ``ocibridge mount``'s own machinery over local files, a fresh mount a sample."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.fusefloor import MOUNTED, Floor
from ocibridge.lazymount.mounttable import is_mounted, unmount_directory

REPO_ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024


def _source(tmp_path: Path) -> tuple[Path, bytes]:
    src = tmp_path / "src"
    src.mkdir()
    data = os.urandom(3 * MiB + 5)
    (src / "model.safetensors").write_bytes(data)
    return src, data


def test_the_floor_serves_the_files_bytes(tmp_path: Path) -> None:
    src, data = _source(tmp_path)
    where = tmp_path / "mnt"
    where.mkdir()
    server = subprocess.Popen([sys.executable, "-m", "bench.fusefloor", str(src), str(where)], cwd=REPO_ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == MOUNTED
        assert (where / "model.safetensors").read_bytes() == data
    finally:
        if server.poll() is None:
            unmount_directory(where)
        assert server.wait(60) == 0


def test_a_sample_mounts_afresh_runs_what_goes_beside_and_unmounts(tmp_path: Path) -> None:
    src, _ = _source(tmp_path)
    where = tmp_path / "mnt"
    beside: list[bool] = []
    floor = Floor(src, where)
    for _ in range(2):
        assert floor.cat("model.safetensors", beside=lambda: beside.append(is_mounted(where))) > 0
        assert not is_mounted(where)
    assert beside == [True, True]
