"""``--upstream-asks-per-client``: how many asks of the upstream one client's misses may cost. A
miss asks the upstream with serve's token, and the upstream's 429 then pauses serve for every
client (ratewindow.py); so each client (:func:`.fetchbounds.client_of`: a token serve knows, else
its address) has a bucket of asks that refills at the rate given, and a miss past it is the Hub's
429 with ``Retry-After`` from serve itself, the upstream not asked. Other clients keep theirs."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ocibridge.errors import OcibridgeError, UsageError
from ocibridge.hubserver.lifetimes.durations import parse_duration, shown

FLAG = "--upstream-asks-per-client"
#: the flag's default: a client's misses ask the upstream at most this often
DEFAULT = "60/min"
#: clients kept at most: past it the least recently seen is forgotten (its bucket the likeliest full
#: again), so a client changing addresses grows the table no further
MOST_CLIENTS = 10_000
_PERIODS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "h": 3600.0, "hour": 3600.0,
            "d": 86400.0, "day": 86400.0}


class AsksSpent(OcibridgeError):
    """A client's misses spent its asks of the upstream: the Hub's 429, asked again after ``retry_after``."""

    retry_after = 1


@dataclass(frozen=True)
class AskRate:
    """``count`` asks per ``period`` seconds, ``count`` of them at once at most."""

    count: int
    period: float

    def __str__(self) -> str:
        unit = {1.0: "s", 60.0: "min", 3600.0: "h"}.get(self.period) or shown(self.period)
        return f"{self.count}/{unit}"


def parse_ask_rate(text: str, flag: str = FLAG) -> AskRate | None:
    """``60/min``, ``5/s``, ``1000/h``, ``100/90s`` (a count and a period: a unit or a duration);
    None for ``off``; one usage line for anything else."""
    said = text.strip().lower()
    if said == "off":
        return None
    count, _, per = said.partition("/")
    try:
        period = _PERIODS.get(per) or parse_duration(per, flag)
    except UsageError:
        period = 0.0
    if not count.isdigit() or int(count) < 1 or not period:
        raise UsageError(f"{flag} {text}: expected asks per period, 1 or more: 60/min, 5/s, 1000/h, or off")
    return AskRate(int(count), period)


class AskBudgets:
    """One bucket of asks per client (a token bucket: ``rate.count`` at most, refilled steadily)."""

    def __init__(self, rate: AskRate, clock: Callable[[], float] = time.monotonic):
        self.rate, self.clock = rate, clock
        self._per_second = rate.count / rate.period
        self._lock = threading.Lock()
        self._held: dict[str, tuple[float, float]] = {}  # client -> (asks left, when counted)
        self.refused = 0

    def take(self, client: str, what: str) -> None:
        """One ask for ``client`` (``what``: the miss, for the refusal), or :class:`AsksSpent`;
        a request of no client (serve's own work) is not counted."""
        if not client:
            return
        with self._lock:
            now = self.clock()
            left, then = self._held.pop(client, (float(self.rate.count), now))  # re-entered last: most recent
            left = min(float(self.rate.count), left + (now - then) * self._per_second)
            if left < 1:
                self._keep(client, left, now)
                self.refused += 1
                spent = AsksSpent(f"{what}: not asked of the upstream now: this client's misses asked it "
                                  f"{self.rate} already ({FLAG}); ask again later")
                spent.retry_after = max(1, math.ceil((1 - left) / self._per_second))
                raise spent
            self._keep(client, left - 1, now)

    def __len__(self) -> int:
        """How many clients' buckets are kept."""
        with self._lock:
            return len(self._held)

    def _keep(self, client: str, left: float, now: float) -> None:
        """``client``'s bucket kept as the most recently seen; the least recently seen forgotten past
        :data:`MOST_CLIENTS` (it starts full when next seen)."""
        self._held[client] = (left, now)
        while len(self._held) > MOST_CLIENTS:
            del self._held[next(iter(self._held))]


#: what a client's misses may ask when the flag is not given
DEFAULT_RATE = parse_ask_rate(DEFAULT)
