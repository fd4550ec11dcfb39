"""docs/architecture.md: its examples run as written, and the modules it names exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_examples_run(tmp_path):
    blocks = FENCE.findall(DOC.read_text())
    assert blocks, "docs/architecture.md has no python example"
    for code in blocks:
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr


def test_named_modules_exist():
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", DOC.read_text()))
    assert named
    missing = [n for n in named if not (ROOT / n).exists() and not any((ROOT / "ocibridge").rglob(n))]
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"
