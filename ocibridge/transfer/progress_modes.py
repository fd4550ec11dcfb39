"""``--progress auto|bar|plain|none``: which display a transfer gets.

| mode | what |
|---|---|
| ``auto`` (default) | the bar on a terminal; nothing when stderr is piped, with ``--json`` or ``-q`` |
| ``bar`` | the bar, even when stderr is not a terminal |
| ``plain`` | a line per blob on stderr: started, already there, mounted, done (size, rate) |
| ``none`` | nothing (``-q``) |
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

from ocibridge.core.terminal import human_size, one_line

if TYPE_CHECKING:  # imported when used: the CLI's --help must not load pydantic
    from typing import TypeAlias

    from ocibridge.oci.models import Descriptor
    from ocibridge.transfer.progress import ProgressBar

    #: what :func:`choose_progress` makes when a display is wanted
    Display: TypeAlias = "ProgressBar | PlainProgress"

MODES = ("auto", "bar", "plain", "none")


class PlainProgress:
    """One line per blob event, for logs and CI: which file is slow shows by its timestamps."""

    def __init__(self, label: str, file: TextIO | None = None):
        self._label = label
        self._file = file or sys.stderr
        self._lock = threading.Lock()
        self._started: dict[str, float] = {}
        self._finished: set[str] = set()

    def __call__(self, kind: str, desc: Descriptor, nbytes: int) -> None:
        if kind == "plan":
            return
        from ocibridge.transfer.progress_events import event_of

        with self._lock:
            if desc.digest in self._finished:
                return
            event = event_of(kind, desc, nbytes)
            size = human_size(event.size)
            if kind in ("start", "bytes"):
                if desc.digest in self._started:
                    return
                self._started[desc.digest] = time.monotonic()
                self._line(f"{event.name}: started ({size})")
            elif kind == "skip":
                self._finished.add(desc.digest)
                self._line(f"{event.name}: already there ({size})")
            elif kind == "mount":
                self._finished.add(desc.digest)
                self._line(f"{event.name}: mounted ({size})")
            elif kind == "done":
                self._finished.add(desc.digest)
                began = self._started.get(desc.digest)
                seconds = time.monotonic() - began if began is not None else 0.0
                rate = f", {human_size(int(event.size / seconds))}/s" if seconds > 0 else ""
                self._line(f"{event.name}: done {size} in {seconds:.2f} s{rate}")

    def _line(self, text: str) -> None:
        print(one_line(f"{self._label}: {text}"), file=self._file, flush=True)

    def close(self) -> None:
        pass


def choose_progress(mode: str, label: str, *, quiet: bool = False,
                    machine_output: bool = False) -> ProgressBar | PlainProgress | None:
    """The display ``mode`` asks for. ``quiet`` (``-q``) wins; ``auto`` also stays silent for
    machine output (``--json``, an archive export with no byte events) and a piped stderr."""
    if quiet or mode == "none":
        return None
    from ocibridge.transfer.progress import ProgressBar

    if mode == "plain":
        return PlainProgress(label)
    if mode == "bar":
        return ProgressBar(label)
    if machine_output or not sys.stderr.isatty():
        return None
    return ProgressBar(label)


def print_above(display: Display | None, line: str, err: TextIO) -> None:
    """``line`` on ``err``, above the bar when ``display`` draws one (a bare print would tear it)."""
    from ocibridge.transfer.progress import ProgressBar

    if isinstance(display, ProgressBar):
        from tqdm import tqdm

        tqdm.write(line, file=err)
    else:
        print(line, file=err, flush=True)


def progress_bar(label: str, file: TextIO) -> Display:
    """A bar drawn on ``file`` (a command that decides for itself when to draw one)."""
    from ocibridge.transfer.progress import ProgressBar

    return ProgressBar(label, file=file)
