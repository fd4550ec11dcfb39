"""``--help`` and ``--version`` load neither pydantic nor httpx (their import is most of a
command's start-up time; the time itself is measured by bench/startup.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PROBE = """
import sys
from ocibridge.cli import main
try:
    main({args!r})
except SystemExit:
    pass
heavy = sorted(m for m in ("pydantic", "httpx", "httpcore", "ocibridge.api") if m in sys.modules)
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["push", "--help"], ["pull", "--help"],
                                  ["convert", "--help"], ["mirror", "--help"]])
def test_help_and_version_import_nothing_heavy(args):
    done = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "HEAVY:", done.stderr
    assert done.stdout  # the help or the version was printed


def test_the_package_names_still_resolve():
    import ocibridge

    assert callable(ocibridge.push) and ocibridge.Kind.WEIGHT.value
    assert sorted(ocibridge.__all__) == sorted(ocibridge._HOMES)
