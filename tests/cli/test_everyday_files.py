"""Files a shared store or an export leaves behind respect the umask (issue 18), as ``open`` would."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.modelgen import make_model
from tests.support.data import data


def _run_with_umask(umask: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ocibridge", *args], capture_output=True, text=True, timeout=120,
        preexec_fn=lambda: os.umask(umask),
    )


def _modes(root: Path) -> set[int]:
    return {stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*") if p.is_file() and p.name != ".ocibridge.lock"}


def test_layout_and_exports_are_group_and_world_readable_under_umask_022(tmp_path):
    model = make_model(tmp_path / "m")
    store = tmp_path / "store"
    proc = _run_with_umask(0o022, "push", str(model), f"oci:{store}:v1")
    assert proc.returncode == 0, proc.stderr
    assert _modes(store) == {0o644}  # index.json, oci-layout, every blob (ingested or copied)
    proc = _run_with_umask(0o022, "push", str(data("carton", "python_runner_doubler.carton")), f"oci:{store}:c")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out.carton"
    proc = _run_with_umask(0o022, "pull", f"oci:{store}:c", str(out))
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    pulled = tmp_path / "dir"
    proc = _run_with_umask(0o022, "pull", f"oci:{store}:v1", str(pulled))
    assert proc.returncode == 0, proc.stderr
    assert _modes(pulled) == {0o644, 0o755}


def test_a_strict_umask_is_honoured_too(tmp_path):
    model = make_model(tmp_path / "m")
    store = tmp_path / "store"
    assert _run_with_umask(0o077, "push", str(model), f"oci:{store}:v1").returncode == 0
    assert _modes(store) == {0o600}
    pulled = tmp_path / "dir"
    assert _run_with_umask(0o077, "pull", f"oci:{store}:v1", str(pulled)).returncode == 0
    assert _modes(pulled) == {0o600, 0o700}
