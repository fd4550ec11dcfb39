"""One lock per key, for work that must not run twice at once for the same thing (a blob sent to
one destination, a partial file appended to), kept only while someone holds or waits for it: the
map does not grow with every key ever seen."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class KeyedLocks(Generic[K]):
    """``with locks.hold(key):`` one holder per key at a time; released by the ``with`` block, so a
    failure never leaves the others waiting."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[K, tuple[threading.Lock, int]] = {}  # key -> (its lock, holders and waiters)

    @contextmanager
    def hold(self, key: K) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(key, (threading.Lock(), 0))
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        """Keys held or waited for now."""
        with self._guard:
            return len(self._locks)
