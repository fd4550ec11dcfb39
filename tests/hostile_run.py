"""Running the CLI in a child process and measuring what it cost (issue 34): the exit code, its
output, its peak resident memory (``ru_maxrss`` of that one child) and the CPU time it spent.
Hostile-input tests assert all of it, and that the directory around the target did not change: the
CPU time is the work a refusal cost, which a loaded machine does not stretch as it does wall time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: The memory any refused hostile input may cost the CLI (an idle CLI is ~60 MB).
RSS_BOUND_MB = 300
#: The CPU time a refused input may cost the CLI, start-up included (~1 s); the unbounded readers
#: spent 20 s to minutes.
CLI_SECONDS = 10


@dataclass
class Ran:
    code: int
    out: str
    err: str
    peak_mb: float
    cpu_seconds: float
    timed_out: bool = False

    def one_error_line(self) -> str:
        """The single ``ocibridge: error:`` line of a refusal (exit 1, no traceback)."""
        assert not self.timed_out, f"the CLI was still running at its time limit (killed): {self.err}"
        assert self.code == 1, (self.code, self.err)
        assert "Traceback" not in self.err, self.err
        lines = self.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ocibridge: error: "), self.err
        return lines[0]


#: Runs the CLI as its own child and writes that child's peak RSS (KiB) and CPU seconds (user and
#: system) to the file argv[1]. A
#: process forked straight from pytest would report pytest's own peak: Linux keeps the larger
#: ``maxrss`` across fork and exec, so the measuring parent must be small itself.
_MEASURE = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    f.write(f"{used.ru_maxrss} {used.ru_utime + used.ru_stime}")
sys.exit(code)
"""


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Ran:
    """``python -m ocibridge ARGS`` with its own peak RSS (not the test session's)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as rss:
        proc = subprocess.Popen([sys.executable, "-c", _MEASURE, rss.name, sys.executable, "-m", "ocibridge", *args],
                                stdout=out, stderr=err, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})},
                                start_new_session=True)
        timed_out = False
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:  # a hang: bounded only so that the test ends
            os.killpg(proc.pid, signal.SIGKILL)
            code, timed_out = proc.wait(), True
        out.seek(0)
        err.seek(0)
        figures = rss.read().split()
        # killed before it could say: unbounded
        peak_kib, cpu = (int(figures[0]), float(figures[1])) if figures else (1 << 40, float("inf"))
        return Ran(code, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                   peak_kib / 1024, cpu, timed_out)


def snapshot(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every path under ``root`` with its kind, size and mtime: what a refusal must leave alone
    (sizes, not contents, so sparse files of gigabytes are never read)."""
    out: dict[str, tuple[str, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            kind = "link" if path.is_symlink() else "dir" if path.is_dir() else "file"
            mtime = st.st_mtime_ns if kind == "file" else 0  # a directory's mtime moves with any staging inside
            out[path.relative_to(root).as_posix()] = (kind, st.st_size if kind == "file" else 0, mtime)
    return out


def sparse(path: Path, size: int, head: bytes = b"") -> Path:
    """A file of ``size`` bytes that costs no disk: ``head`` then a hole."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)
    return path
