"""A range received a unit (a chunk) at a time whose unread rest another request may take.

A long range cannot be shortened on the wire once asked; its reader can stop early, at a unit
boundary, and close the response. At the end of a load, when a request is idle and nothing is
left to ask, the range with the most left is split: its reader keeps the first half of what it
has not yet started (``keep`` bytes at least), and the idle request asks the rest. A connection
slower than the others is then left with about ``keep`` bytes for them to wait on, not with the
rest of a long range.
"""

from __future__ import annotations

import threading


class SplitRange:
    """Bytes ``[start, end)`` of a file, received in ``unit``s from ``start``; :meth:`split`
    moves ``end`` back to a unit boundary its reader has not reached yet."""

    def __init__(self, start: int, end: int, unit: int):
        self.start = start
        self.unit = unit
        self._end = end
        self._claimed = start  # the end of the unit being received: up to here, the reader's
        self._lock = threading.Lock()

    @property
    def end(self) -> int:
        with self._lock:
            return self._end

    @property
    def rest(self) -> int:
        """Bytes no unit being received has reached yet."""
        with self._lock:
            return self._end - self._claimed

    def next_stop(self, at: int) -> int:
        """(the reader, at ``at``) The end of the unit to receive next; ``at`` itself once the
        range is done: it stops there."""
        with self._lock:
            stop = min(self._end, (at // self.unit + 1) * self.unit) if at < self._end else at
            self._claimed = stop
            return stop

    def split(self, keep: int) -> tuple[int, int] | None:
        """Give up the second half of the unread rest, ``keep`` bytes at least kept (whole
        units): the bytes given up, ``(cut, end)``, or None when nothing is left to give."""
        with self._lock:
            kept = max(keep, (self._end - self._claimed) // 2)
            cut = -(-(self._claimed + kept) // self.unit) * self.unit
            if cut >= self._end:
                return None
            given = (cut, self._end)
            self._end = cut
            return given
