"""Run the console entry point (``ocibridge.cli.run``) in a fresh interpreter and report which
of some heavy modules it imported: what the start-up tests (warm ``path``) pin down."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import sys
sys.argv = ["ocibridge", *{args!r}]
from ocibridge.cli import run
try:
    run()
except SystemExit as e:
    code = e.code
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
sys.exit(code)
"""


def run_entry(args: Sequence[str], heavy: Sequence[str]) -> tuple[int, str, str, list[str]]:
    """(exit code, stdout, stderr without the probe's line, the ``heavy`` modules imported)."""
    done = subprocess.run([sys.executable, "-c", _PROBE.format(args=list(args), heavy=tuple(heavy))],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    *err, last = done.stderr.strip().splitlines()
    assert last.startswith("HEAVY:"), done.stderr
    return done.returncode, done.stdout.strip(), "\n".join(err), [m for m in last[6:].split(",") if m]
