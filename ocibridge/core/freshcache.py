"""Answers kept a few seconds: one small cache for what serve reads again and again (a listing's
rows, a model page's refs), instead of a lock, a dict and a clock written out at each place.

A value is made outside the lock (a slow registry read holds up no other key; two callers may
both make one, the last kept wins), and the cache is bounded the simple way: at ``kept``
entries, all are dropped before the next is kept."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class FreshCache(Generic[K, V]):
    """Each key's value, made again once it is ``fresh`` seconds old."""

    def __init__(self, fresh: float, kept: int, clock: Callable[[], float] = time.monotonic):
        self.fresh = fresh
        self.kept = kept
        self.clock = clock
        self._lock = threading.Lock()
        self._known: dict[K, tuple[float, V]] = {}

    def get(self, key: K, make: Callable[[], V]) -> V:
        """The value kept for ``key`` while it is fresh, else ``make()``'s, kept from now on
        (stamped when it was asked for: it is never older than it claims)."""
        now = self.clock()
        with self._lock:
            known = self._known.get(key)
        if known is not None and now - known[0] < self.fresh:
            return known[1]
        made = make()
        with self._lock:
            if len(self._known) >= self.kept:
                self._known.clear()
            self._known[key] = (now, made)
        return made

    def forget(self, key: K) -> None:
        """``key``'s value is made again when next asked for (its source changed)."""
        with self._lock:
            self._known.pop(key, None)
