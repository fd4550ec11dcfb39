"""Progress display: a tqdm bar on a terminal, nothing when piped or with --json.

tqdm is used rather than a hand-written bar: it handles terminal width, rates, ETA and
thread-safe updates, which the copy's worker threads need.
"""

from __future__ import annotations

import sys
import threading

from .copy import ProgressFn
from .oci.models import Descriptor


class ProgressBar:
    """Counts bytes of blobs finished, skipped or mounted; total grows as blobs are seen."""

    def __init__(self, description: str):
        from tqdm import tqdm

        self._bar = tqdm(
            total=0, unit="B", unit_scale=True, unit_divisor=1024, desc=description,
            file=sys.stderr, leave=True, dynamic_ncols=True,
        )
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self._finished: set[str] = set()

    def __call__(self, event: str, desc: Descriptor, nbytes: int) -> None:
        with self._lock:
            if desc.digest not in self._seen:
                self._seen.add(desc.digest)
                self._bar.total += desc.size
                self._bar.refresh()
            if event in ("done", "skip", "mount") and desc.digest not in self._finished:
                self._finished.add(desc.digest)
                self._bar.update(nbytes)

    def close(self) -> None:
        self._bar.close()


def make_progress(description: str, enabled: bool) -> ProgressBar | None:
    if not enabled or not sys.stderr.isatty():
        return None
    return ProgressBar(description)


def as_callback(bar: ProgressBar | None) -> ProgressFn | None:
    return bar
