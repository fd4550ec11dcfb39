"""A module does one job, and one job fits in a screenful of screens: no module of the package
is over :data:`MAX_LINES` lines (a longer one is split along a seam, each part named for its job)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ocibridge"
MAX_LINES = 450


def test_no_module_is_over_the_limit():
    over = {str(path.relative_to(PACKAGE)): n for path in sorted(PACKAGE.rglob("*.py"))
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines: {over}"


def test_the_package_is_read():
    """The walk finds the package's modules (an empty walk would pass the test above)."""
    assert (PACKAGE / "hubserver" / "app.py").is_file()
    assert len(list(PACKAGE.rglob("*.py"))) > 100
