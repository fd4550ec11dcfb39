"""Where the suite's committed inputs live: tests/data, inside the repository.

A missing input is a failed test, never a skip: ``data()`` raises when the path is absent.
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"


def data(*parts: str) -> Path:
    """Path of a committed test input; raise if it is not there."""
    path = DATA.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"test input missing from the repository: {path}")
    return path
