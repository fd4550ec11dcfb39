"""docs/architecture.md and its pages (architecture-*.md): their examples run as written, and the
modules they name exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("architecture*.md"))
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def text() -> str:
    return "\n".join(page.read_text() for page in PAGES)


def test_examples_run(tmp_path):
    assert len(PAGES) > 1
    blocks = FENCE.findall(text())
    assert blocks, "docs/architecture*.md have no python example"
    for code in blocks:
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr


def test_named_modules_exist():
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", text()))
    assert named
    missing = [n for n in named if not (ROOT / n).exists() and not any((ROOT / "ocibridge").rglob(n))]
    assert not missing, f"docs/architecture*.md name modules that do not exist: {missing}"
