"""serve's lifetime thread (``--upstream-keep``): every while it writes the reads noted since
its last pass (every serve, readers too: each answered its own reads) and, on the serve that
fetches (the writer), sweeps what was not read for the lifetime (:mod:`.sweep`), each drop an audit
line. The pass runs every quarter of the lifetime, at most every minute for the reads and every
hour for the sweep, so a revision goes at most a quarter of its lifetime (or an hour) late."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ocibridge.hubserver.lifetimes.durations import shown
from ocibridge.hubserver.lifetimes.notes import ReadNotes
from ocibridge.hubserver.lifetimes.sweep import Audit, Sweep
from ocibridge.hubserver.repo.sources import Source

log = logging.getLogger("ocibridge.hubserver")
#: seconds between two flushes of the reads, and two sweeps, at most
FLUSH_MAX = 60.0
SWEEP_MAX = 3600.0
#: seconds between two passes at least (a lifetime of seconds, in a test)
PASS_MIN = 0.25


@dataclass
class Keeper:
    """What the thread needs of serve: its first source, the notes, who sweeps, where drops go."""

    source: Source
    keep: float
    notes: ReadNotes
    sweeps_here: Callable[[], bool]  # the writer's: one serve of the fleet drops
    audit: Audit
    forget: Callable[[str], None]  # what this serve knew of a repository that lost revisions

    def flush_period(self) -> float:
        return max(PASS_MIN, min(FLUSH_MAX, self.keep / 4))

    def sweep_period(self) -> float:
        return max(PASS_MIN, min(SWEEP_MAX, self.keep / 4))

    def sweep(self) -> None:
        self.notes.flush()  # this serve's own reads first: a commit just read is not dropped
        Sweep(self.source, self.keep, self.notes.clock(), audit=self.audit, forget=self.forget,
              writing=self.notes.writing).run()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """The thread, until leaving (the reads noted since its last pass written then)."""
        stop = threading.Event()

        def run() -> None:
            last_sweep = time.monotonic()
            while not stop.wait(self.flush_period()):
                try:
                    if self.sweeps_here() and time.monotonic() - last_sweep >= self.sweep_period():
                        last_sweep = time.monotonic()
                        self.sweep()
                    else:
                        self.notes.flush()
                except Exception as e:  # noqa: BLE001 - the next pass tries again
                    log.warning("upstream-keep: a pass failed (tried again): %s", e)

        thread = threading.Thread(target=run, name="upstream-keep", daemon=True)
        thread.start()
        log.info("upstream-keep: a fetched commit no one read for %s is dropped (reads recorded every %gs; "
                 "swept every %gs by the serve that fetches)", shown(self.keep), self.flush_period(),
                 self.sweep_period())
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=10)
            with contextlib.suppress(Exception):
                self.notes.flush()
