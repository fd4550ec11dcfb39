"""How many ranged parts of one blob are in flight: chosen by the rate they reach.

More connections help a link that caps each one (object stores, CDNs, long fat links) and
cost where one stream already fills the link (loopback, a LAN): there the extra streams only
share the CPUs with hashing, writing and the registry itself. So a download starts with one
part in flight (and keeps it when that one is already fast, :data:`FAST_STREAM`), and takes
four times as many after each window in which the rate rose by at least half over the window
before (1, 4, 16: on a link capping each connection at 20 MiB/s with a 40 ms round trip,
doubling instead took 1.6 s to reach 16 parts, 1 s more than a fixed 16 over 512 MiB); the
first window in which it did not, it steps back to the count that did best and stays there.
A fixed count (``--parts N``) skips all of this.

Parts start in order (tickets are handed out as slots free up), so the prefix the hasher
follows grows without holes and a rerun finds few half-written parts. While one part is
allowed, its request asks for the rest of the blob and the next parts follow on the same
connection: a fast link spends one request, not one per part (on loopback, one request per
32 MiB part cost ~0.3 s per GiB, the registry spending more CPU as well).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

#: ``--debug`` shows each judgement (debuglog.py)
LOG = logging.getLogger("ocibridge.parts")

#: How long each count of parts is measured for: long enough for new connections to get
#: past TCP slow start on a 40 ms round trip, short enough that a fast link spends little of
#: a large blob trying a count that is worse.
WINDOW_SECONDS = 0.3
#: The first part of each window is not counted: new connections are still ramping up.
SETTLE_SECONDS = 0.1
#: A step up (four times the parts) is kept when the rate rose by at least this factor: a link
#: that caps each connection gives close to 4x; on loopback two cores gave 0.9-1.4x, which
#: the extra read-back of parts hashed out of order then costs again.
GAIN = 1.5
#: Each step up multiplies the parts in flight by this.
STEP = 4
#: A window short of GAIN is measured again while its rate still rose by this factor over
#: the window before (at most MAX_EXTRA_WINDOWS times per step): on the shaped link, the
#: first window after 4 -> 16 parts fell short of 1.5x while the new connections ramped up,
#: and settling back at 4 made 1 GiB take 11.3 s against 7.3 s with a fixed 16.
CLIMBING = 1.05
MAX_EXTRA_WINDOWS = 3
#: One stream at least this fast stays alone: the caps that more connections get around
#: (an object store's or CDN's per-connection rate, a TCP window over a long round trip: 6 MiB
#: over 40 ms is ~150 MiB/s) sit well below it, and what limits such a stream is the CPU that
#: more streams would share. On loopback (two cores) one stream brought 600-680 MiB/s and four
#: 535-677 MiB/s; trying four cost 0.1-0.3 s per GiB (1.98 s against 1.68-1.89 s, three runs).
FAST_STREAM = 256 * 2**20


class PartsAbandoned(Exception):
    """The download stopped (a part failed, or an interrupt): waiting parts do not start."""


class PartGovernor:
    """Admits parts in order, as many at once as the measured rate says are worth it."""

    def __init__(self, ceiling: int, adaptive: bool = True,
                 clock: Callable[[], float] = time.monotonic, tickets: int | None = None):
        self.ceiling = max(1, ceiling)
        self.allowed = 1 if adaptive else self.ceiling
        self._settled = not adaptive or self.ceiling == 1
        self._clock = clock
        self._cond = threading.Condition()
        self._tickets = tickets  # parts to hand out (None: no end)
        self._next_ticket = 0
        self._active = 0
        self._stopped = False
        self._best_rate = 0.0
        self._best_allowed = 1
        self._rate_here = 0.0  # the last window's rate at the count now allowed
        self._extra_windows = 0
        self._window_bytes = 0
        self._window_start = clock() + SETTLE_SECONDS
        self.history: list[tuple[int, float]] = []  # (parts allowed, bytes/s) per window

    # -- admission --------------------------------------------------------------------
    def _handed_out(self) -> bool:
        return self._tickets is not None and self._next_ticket >= self._tickets

    def _take_ticket(self) -> int:
        ticket = self._next_ticket
        self._next_ticket += 1
        if self._handed_out():
            self._cond.notify_all()  # workers waiting for a slot have nothing left to wait for
        return ticket

    def admit(self) -> int | None:
        """Wait for a free slot, then take it with the next part's ticket (0, 1, 2, … in the
        order the parts come in the blob); ``None`` once every ticket is handed out."""
        with self._cond:
            while not self._stopped and not self._handed_out() and self._active >= self.allowed:
                self._cond.wait()
            if self._stopped:
                raise PartsAbandoned
            if self._handed_out():
                return None
            self._active += 1
            return self._take_ticket()

    def carry_on(self) -> int | None:
        """A part is done: the next ticket for the same slot while as many parts are allowed
        as run now (its connection may go on into the next part), else the slot is left and
        ``None`` returned."""
        with self._cond:
            if not self._stopped and not self._handed_out() and self._active <= self.allowed:
                return self._take_ticket()
            self._active -= 1
            self._cond.notify_all()
            return None

    def leave(self) -> None:
        """Give the slot back without taking another ticket (a part failed)."""
        with self._cond:
            self._active -= 1
            self._cond.notify_all()

    @property
    def one_at_a_time(self) -> bool:
        """One part is allowed now: a part's request may ask for the rest of the blob, for
        the parts after it to follow on the same connection."""
        return self.allowed == 1

    def stop(self) -> None:
        """Parts still waiting give up (they raise :class:`PartsAbandoned`)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    # -- measuring --------------------------------------------------------------------
    def count(self, n: int) -> None:
        """``n`` more bytes arrived (any part); may change how many parts are allowed."""
        if self._settled:
            return
        with self._cond:
            now = self._clock()
            if now < self._window_start:
                return  # settling after a change
            self._window_bytes += n
            elapsed = now - self._window_start
            if elapsed < WINDOW_SECONDS:
                return
            self._judge(self._window_bytes / elapsed)
            self._window_bytes = 0
            self._window_start = now + SETTLE_SECONDS

    def _judge(self, rate: float) -> None:
        self.history.append((self.allowed, rate))
        tried, verdict = self.allowed, ""
        if tried == 1 and rate >= FAST_STREAM:
            self._best_allowed, self._settled = 1, True
            verdict = " (fast enough alone: settled)"
        elif rate >= self._best_rate * GAIN:
            if self.allowed < self.ceiling:
                self._best_rate, self._best_allowed = rate, self.allowed
                self.allowed = min(self.ceiling, self.allowed * STEP)
                self._rate_here, self._extra_windows = 0.0, 0
                self._cond.notify_all()
            else:  # at the ceiling, and it paid: stay
                self._best_allowed, self._settled = self.allowed, True
        elif rate > max(self._best_rate, self._rate_here) * CLIMBING and self._extra_windows < MAX_EXTRA_WINDOWS:
            # better than before, not yet by GAIN, and still rising: new connections may be
            # in TCP slow start (a 40 ms round trip needs ~6 of them to reach 20 MiB/s)
            self._rate_here = rate
            self._extra_windows += 1
            verdict = " (still rising: measured again)"
        else:
            self.allowed, self._settled = self._best_allowed, True
        LOG.info("ranged parts: %d in flight brought %.1f MiB/s; now %d%s", tried, rate / 2**20,
                 self.allowed, verdict or (" (settled)" if self._settled else ""))
