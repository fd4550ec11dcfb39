"""serve's ``--token-file``: read with each line's own number in what it says about a line, and
watched, so that a token removed (or added, or narrowed) takes effect without a restart.

The file is looked at (one ``stat``) at most once every :data:`CHECK_EVERY` seconds, when a
decision of :class:`.access.Gate` needs it, and read again when its identity, size or times
changed (an editor's rename, a Kubernetes Secret's swapped link, an append). No thread of its
own: a server nobody asks anything keeps nothing to refuse.
"""

from __future__ import annotations

import codecs
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ocibridge.errors import UsageError

#: seconds between two looks at the token file
CHECK_EVERY = 1.0


def numbered_lines(path: str) -> tuple[list[int], list[str]]:
    """The token lines of ``path`` and the number of each in the file (blank lines and ``#``
    comments skipped); :class:`UsageError` naming the file (and the line) when it cannot be
    read, is not UTF-8 text, or holds no token."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"--token-file {path}: {e.strerror or e}") from None
    numbers: list[int] = []
    lines: list[str] = []
    for number, raw in enumerate(data.removeprefix(codecs.BOM_UTF8).splitlines(), 1):
        try:
            text = raw.decode("utf-8").strip()
        except UnicodeDecodeError as e:
            raise UsageError(f"--token-file {path} line {number}: not UTF-8 text (byte 0x{raw[e.start]:02x} "
                             f"at column {e.start + 1})") from None
        if text and not text.startswith("#"):
            numbers.append(number)
            lines.append(text)
    if not lines:
        raise UsageError(f"--token-file {path}: holds no token")
    return numbers, lines


class TokenFile:
    """The token file, as :class:`.access.Gate` watches it."""

    def __init__(self, path: str, *, every: float = CHECK_EVERY, clock: Callable[[], float] = time.monotonic):
        self.path = path
        self.every = every
        self.clock = clock
        self._looked = clock()
        self._lock = threading.Lock()
        self._seen = self._identity()  # what the lines serve started with were read from

    def _identity(self) -> tuple[int, ...] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def due(self) -> bool:
        """Whether it is time to look at the file again (then the next look is :attr:`every` on)."""
        now = self.clock()
        with self._lock:
            if now - self._looked < self.every:
                return False
            self._looked = now
            return True

    def changed(self) -> tuple[list[int], list[str]] | None:
        """The file's lines with their numbers when it changed since it was last read (None: it
        did not); :class:`UsageError` when it changed into something unusable (gone too)."""
        if not self.moved():
            return None
        return numbered_lines(self.path)

    def moved(self) -> bool:
        """Whether the file changed (or is gone) since it was last looked at this way; what it is
        now is what the next look compares with."""
        seen = self._identity()
        if seen == self._seen and seen is not None:
            return False
        self._seen = seen
        return True
