"""A cap on the bytes a reader may fetch from a registry, taken before each fetch.

Serve's compare pages are asked for by anyone who may read (and as often as they like): what one
page may read is bounded before the bytes move, not counted afterwards. A fetch asks for its
whole size first (a range of chunks, or a whole blob); one that does not fit raises
:class:`OverBudget` and moves nothing, so what was read never passes the cap.
"""

from __future__ import annotations

import threading

from ocibridge.errors import OcibridgeError


class OverBudget(OcibridgeError):
    """A fetch that would pass the read budget: not made."""


class ReadBudget:
    """``limit`` bytes to fetch, shared by every reader given it; thread-safe."""

    def __init__(self, limit: int):
        self.limit = max(0, limit)
        self.taken = 0
        self._lock = threading.Lock()

    @property
    def left(self) -> int:
        with self._lock:
            return self.limit - self.taken

    def take(self, size: int, what: str) -> None:
        """Reserve ``size`` bytes for fetching ``what``, or raise :class:`OverBudget`."""
        with self._lock:
            if self.taken + size > self.limit:
                raise OverBudget(f"{what}: {size} bytes more would pass the read budget of {self.limit} bytes")
            self.taken += size


__all__ = ["OverBudget", "ReadBudget"]
