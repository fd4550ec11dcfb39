"""``python -m ocibridge.mirror``: the engine's own entry, which imports nothing above the mirror
package (issue 60), still answers a bad job or shard with one line and its exit code."""

from __future__ import annotations

import subprocess
import sys


def _run(*args: str, cwd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ocibridge.mirror", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_a_missing_job_file_is_one_line_and_exit_1(tmp_path):
    done = _run(str(tmp_path / "absent.toml"), cwd=str(tmp_path))
    assert done.returncode == 1
    assert done.stderr.startswith("ocibridge: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_shard_is_one_line_and_exit_2(tmp_path):
    done = _run(str(tmp_path / "job.toml"), "--shard", "3/2", cwd=str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith("ocibridge: error: ") and done.stderr.count("\n") == 1, done.stderr


def test_the_entry_imports_nothing_above_the_mirror_package():
    code = ("import sys, ocibridge.mirror.__main__; "
            "print(sorted(m for m in sys.modules if m.startswith(('ocibridge.cli', 'ocibridge.api'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"
