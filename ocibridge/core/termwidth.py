"""The width to draw a progress bar in, on any terminal.

A terminal can report 0 columns (a pty opened by ``script -q -c …``, some CI runners, a serial
console): tqdm then draws no bar at all. Such a terminal, or one that cannot be asked, gets
``$COLUMNS`` when set, else a sane fallback.
"""

from __future__ import annotations

import os
from typing import TextIO

FALLBACK_COLUMNS = 80


def reported_columns(file: TextIO) -> int:
    """What the terminal behind ``file`` says its width is (0 when it says nothing)."""
    try:
        return os.get_terminal_size(file.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 0


def fallback_columns() -> int:
    """``$COLUMNS`` when it is a positive number, else :data:`FALLBACK_COLUMNS`."""
    value = os.environ.get("COLUMNS", "")
    return int(value) if value.isdigit() and int(value) > 0 else FALLBACK_COLUMNS
