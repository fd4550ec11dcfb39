"""The width to draw a progress bar in, on any terminal.

A terminal can report 0 columns (a pty opened by ``script -q -c …``, some CI runners, a serial
console): tqdm then draws no bar at all. Such a terminal, or one that cannot be asked, gets
``$COLUMNS`` when set, else a sane fallback. It reports 0 rows too, and tqdm, asking the
terminal for the rows it was not given, then draws nothing at all (its bar's line is past the
last of -1 rows): the rows get ``$LINES`` or a fallback the same way.
"""

from __future__ import annotations

import os
from typing import TextIO

FALLBACK_COLUMNS = 80
FALLBACK_LINES = 24


def reported_columns(file: TextIO) -> int:
    """What the terminal behind ``file`` says its width is (0 when it says nothing)."""
    return _reported(file).columns


def reported_lines(file: TextIO) -> int:
    """What the terminal behind ``file`` says its height is (0 when it says nothing)."""
    return _reported(file).lines


def _reported(file: TextIO) -> os.terminal_size:
    try:
        return os.get_terminal_size(file.fileno())
    except (OSError, ValueError, AttributeError):
        return os.terminal_size((0, 0))


def fallback_columns() -> int:
    """``$COLUMNS`` when it is a positive number, else :data:`FALLBACK_COLUMNS`."""
    value = os.environ.get("COLUMNS", "")
    return int(value) if value.isdigit() and int(value) > 0 else FALLBACK_COLUMNS


def fallback_lines() -> int:
    """``$LINES`` when it is a positive number, else :data:`FALLBACK_LINES`."""
    value = os.environ.get("LINES", "")
    return int(value) if value.isdigit() and int(value) > 0 else FALLBACK_LINES
