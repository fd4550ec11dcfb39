"""What a child process wrote to a pseudo-terminal, read until it closed its end."""

from __future__ import annotations

import os


def read_screen(master: int) -> bytes:
    """Every byte written to the pty's slave side, until the child closes it; closes ``master``."""
    screen = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        screen += data
    os.close(master)
    return screen
