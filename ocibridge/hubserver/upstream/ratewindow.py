"""The upstream's own limit (a 429 with ``Retry-After``), obeyed by the whole serve at once: the
first 429 opens a window as long as the upstream asked, and while it is open no request goes to
the upstream's origin. A metadata ask made for a client is answered at once with the Hub's 503
and the window's ``Retry-After`` (:class:`.errors.UpstreamBusy`); a fetch already under way waits
the window out, then goes on. Without this every waiting client's retry would be another request
to an upstream that just asked for quiet (a stampede that keeps the limit on).

Only the serve that fetches asks the upstream (the writer: upstream/proxy.py ``fetches_here``), so
its window is the fleet's."""

from __future__ import annotations

import email.utils
import math
import threading
import time
from collections.abc import Callable, Mapping

from ocibridge.hubserver.upstream.errors import UpstreamBusy

#: seconds waited when a 429 names no Retry-After
WAIT_UNSAID = 5.0
#: seconds at most one 429 keeps the upstream closed (an upstream that asks for a day is asked again sooner)
WAIT_MOST = 600.0


def retry_after(headers: Mapping[str, str], now: Callable[[], float] = time.time) -> float:
    """The seconds a 429's ``Retry-After`` asks for (a number, or an HTTP date), within [0, :data:`WAIT_MOST`];
    :data:`WAIT_UNSAID` when it says none that parses."""
    said = (headers.get("retry-after") or "").strip()
    try:
        seconds = float(said)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(said).timestamp() - now()
        except (ValueError, TypeError, OverflowError):  # neither: the upstream's word is not read
            return WAIT_UNSAID
    if math.isnan(seconds):
        return WAIT_UNSAID
    return min(max(seconds, 0.0), WAIT_MOST)


class RateWindow:
    """When the upstream may be asked again (its last 429's ``Retry-After``): one per session."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._lock = threading.Lock()
        self._until = 0.0
        self.opened = 0  # windows opened (each a 429 that came while none was open)

    def open_for(self, seconds: float) -> None:
        """A 429 asked for ``seconds`` of quiet: the window stretched to cover them."""
        with self._lock:
            until = self.clock() + seconds
            if self._until <= self.clock():
                self.opened += 1
            self._until = max(self._until, until)

    def left(self) -> float:
        """Seconds until the upstream may be asked (0: now)."""
        with self._lock:
            return max(0.0, self._until - self.clock())

    def check(self, what: str, url: str) -> None:
        """:class:`UpstreamBusy` while the window is open: nothing sent, the client told when to come back."""
        left = self.left()
        if left > 0:
            raise busy(what, url, left)

    def wait(self) -> None:
        """Until the window closes (a fetch under way: it goes on after)."""
        while (left := self.left()) > 0:
            time.sleep(min(left, 1.0))


def busy(what: str, url: str, left: float) -> UpstreamBusy:
    """The Hub's 503 for a request the upstream's limit holds back, with the window's Retry-After."""
    failed = UpstreamBusy(f"{what}: the upstream {url} asked for a pause (429); ask again in {math.ceil(left)} s")
    failed.retry_after = max(1, math.ceil(left))
    return failed
