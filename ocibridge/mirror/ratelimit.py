"""A token bucket that paces the HTTP requests a mirror sends to a source registry.

The bucket is a request gate (stores/registry/options.py): the mirror hands it to the source
store in its RegistryOptions, and the client's gate layer makes every request wait for it.
Each request (including retries, redirects and token requests) takes one token; the bucket
refills at ``rate`` per second up to ``burst``. The wait is the interruptible sleep of
core/interrupt.py: at a low rate a worker may wait minutes, and SIGINT/SIGTERM must end it at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ocibridge.core import interrupt


class TokenBucket:
    """Thread-safe; ``acquire`` blocks until a token is free."""

    def __init__(self, rate: float, burst: int = 1, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = interrupt.sleep):
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()
        self.waited = 0.0  # total seconds callers were held back

    def acquire(self) -> None:
        """Take a token, reserving one in the future (and sleeping until then) if none is left;
        raises :class:`~ocibridge.core.interrupt.Interrupted` once the user asked to stop."""
        interrupt.check()
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= 1
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
            self.waited += wait
        if wait > 0:
            self._sleep(wait)
