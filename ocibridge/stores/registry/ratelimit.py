"""``--limit-rate``: one byte budget per second shared by every transfer of the process.

A token bucket: each chunk sent or received takes its size from the bucket and waits until
the bucket has refilled enough. Shared, so parts in flight and blobs in parallel together stay
under the cap, as curl's ``--limit-rate`` does for one transfer.
"""

from __future__ import annotations

import threading
import time

from ... import interrupt


class RateLimit:
    """At most ``rate`` bytes per second on average, bursts of at most one second's worth."""

    def __init__(self, rate: int):
        if rate < 1:
            raise ValueError("the rate must be at least 1 byte per second")
        self.rate = rate
        self._lock = threading.Lock()
        self._available = float(rate)
        self._stamp = time.monotonic()

    def take(self, n: int) -> None:
        """Account ``n`` bytes, sleeping as long as the budget asks."""
        with self._lock:
            now = time.monotonic()
            self._available = min(float(self.rate), self._available + (now - self._stamp) * self.rate)
            self._stamp = now
            self._available -= n
            wait = -self._available / self.rate if self._available < 0 else 0.0
        if wait > 0:
            interrupt.sleep(wait)

