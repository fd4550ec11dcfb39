"""Run one measured command as a child process: wall time and that child's own peak RSS.

``ru_maxrss`` from ``getrusage(RUSAGE_CHILDREN)`` is a maximum over *all* children ever waited
for, so it cannot tell two runs apart; ``os.wait4`` returns the rusage of exactly one child.
But a child's ``ru_maxrss`` also starts at its parent's RSS: Linux carries the high-water mark
of the address space it had before ``exec`` (fork/vfork copy the parent's), so a tool started
straight from this ~55 MB Python process would never report less than 55 MB. The command is
therefore started under GNU ``/usr/bin/time -f %M``, a ~2 MB C program that forks the tool
itself and reports the tool's peak RSS from its own ``wait4``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else shutil.which("time")


def python_path(*first: str) -> str:
    """``first`` ahead of the environment's own PYTHONPATH: a machine whose dependencies sit in a
    folder of wheels on PYTHONPATH (the GPU machine's, bench/gpu/install.sh) keeps them."""
    return os.pathsep.join(filter(None, (*first, os.environ.get("PYTHONPATH"))))


class CommandFailed(RuntimeError):
    """A measured command exited non-zero; the message carries its stderr tail."""


@dataclass
class Sample:
    seconds: float
    rss_mb: float
    stdout: str
    cpu: float = 0.0  # user + system seconds of the command and what it waited for (wait4)


@dataclass
class Series:
    """Repeated samples of one measurement."""

    label: str
    samples: list[Sample] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def times(self) -> list[float]:
        return [s.seconds for s in self.samples]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def spread(self) -> tuple[float, float]:
        return min(self.times), max(self.times)

    @property
    def rss_mb(self) -> float:
        return max(s.rss_mb for s in self.samples)


def run_measured(cmd: Sequence[str], *, cwd: str | None = None, env: dict[str, str] | None = None,
                 check: bool = True) -> Sample:
    """Run ``cmd`` to completion; stdout is kept (small JSON summaries), stderr only on failure."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as rss_file:
        argv = list(cmd)
        if GNU_TIME:
            argv = [GNU_TIME, "-f", "%M", "-o", rss_file.name, *argv]
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # tell Popen it has been reaped
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        if check and proc.returncode != 0:
            tail = err.read().decode(errors="replace")[-2000:]
            raise CommandFailed(f"{' '.join(cmd)} exited {proc.returncode}:\n{tail}")
        rss_kb = usage.ru_maxrss
        if GNU_TIME:
            lines = rss_file.read().split()
            rss_kb = int(lines[-1]) if lines and lines[-1].isdigit() else rss_kb
    return Sample(seconds=elapsed, rss_mb=rss_kb / 1024, stdout=stdout, cpu=usage.ru_utime + usage.ru_stime)


def run_quiet(cmd: Sequence[str], *, cwd: str | None = None, env: dict[str, str] | None = None) -> str:
    """An unmeasured helper command (setup): raise with stderr on failure, return stdout."""
    done = subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise CommandFailed(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return done.stdout
