"""What the proxy (serve ``--upstream``) may be made to fetch: each ingest decided twice before a
byte of a file is asked of the upstream.

1. when it would start (:meth:`IngestLimits.admit`): the client (its token, else its address:
   upstream/fetchbounds.py) has started ``ingests-per-hour`` ingests in the last hour, the 429
   the Hub answers a client over its rate, with Retry-After; the ingest namespace is at its byte
   limit, the Hub's 403;
2. on the upstream's listing of the commit's files, with their sizes (:meth:`Admitted.listed`):
   larger than ``--upstream-max-size``, or past the ingest namespace's bytes, the 403; past the
   client's ``bytes-per-hour``, the 429.

Each refusal is one of the door's (:class:`..repo.sources.UpstreamRefused`: its audit line
says refused, nothing lands) but not remembered for the commit: an hour later, or with a larger
quota, the same request fetches it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from ocibridge.core.terminal import human_size
from ocibridge.hubserver.quotas.enforce import QuotaExceeded, Quotas
from ocibridge.hubserver.quotas.quotafile import IngestRules
from ocibridge.hubserver.repo.sources import UpstreamRefused

HOUR = 3600.0


class IngestRefused(UpstreamRefused, QuotaExceeded):
    """An ingest its size or its namespace's quota keeps out: the Hub's 403."""

    lasting = False


class IngestRateLimited(UpstreamRefused):
    """An ingest over its client's hourly allowance: the Hub's 429, asked again after ``retry_after``."""

    lasting = False
    retry_after = 60

    def __init__(self, message: str, rule: str, retry_after: float):
        super().__init__(message, rule)
        self.retry_after = max(1, int(retry_after + 0.999))


class _Window:
    """One client's ingests and bytes of the last hour."""

    def __init__(self) -> None:
        self.starts: deque[float] = deque()
        self.fetched: deque[tuple[float, int]] = deque()

    def trim(self, now: float) -> None:
        while self.starts and now - self.starts[0] >= HOUR:
            self.starts.popleft()
        while self.fetched and now - self.fetched[0][0] >= HOUR:
            self.fetched.popleft()

    def bytes(self) -> int:
        return sum(size for _, size in self.fetched)


class Admitted:
    """One ingest let start: what decides it again on its listing."""

    def __init__(self, limits: IngestLimits, client: str, key: str):
        self.limits, self.client, self.key = limits, client, key

    def listed(self, sizes: Sequence[int]) -> None:
        self.limits.listed(self.client, self.key, sum(sizes))


class IngestLimits:
    """The rules of ``--quotas`` [upstream] and ``--upstream-max-size``/``--upstream-quota-namespace``."""

    def __init__(self, quotas: Quotas | None, max_size: int | None = None, namespace: str | None = None,
                 clock: Callable[[], float] = time.monotonic, said: Callable[[], IngestRules] | None = None):
        self.quotas = quotas
        self.said = said or (lambda: quotas.rules().upstream if quotas is not None else IngestRules())
        self.max_size = max_size
        self.namespace = namespace.lower() if namespace else None
        self.clock = clock
        self._lock = threading.Lock()
        self._clients: dict[str, _Window] = {}

    def rules(self) -> IngestRules:
        said = self.said()  # the file's [upstream], read again when it changed; the flags win
        return IngestRules(self.namespace or said.namespace,
                           said.max_size if self.max_size is None else self.max_size,
                           said.ingests_per_hour, said.bytes_per_hour)

    def _window(self, client: str, now: float) -> _Window:
        window = self._clients.setdefault(client, _Window())
        window.trim(now)
        if len(self._clients) > 65536:  # many addresses: those with nothing in the hour go
            for name in [c for c, w in self._clients.items() if not w.starts and not w.fetched]:
                del self._clients[name]
        return window

    def _namespace_room(self, rules: IngestRules, size: int, what: str) -> None:
        """Refused when the namespace's quota (serve --quotas) has no room for ``size`` bytes more."""
        if rules.namespace is not None and self.quotas is not None:
            try:
                self.quotas.namespace_adding(rules.namespace, size)
            except QuotaExceeded as e:
                raise IngestRefused(f"{what}: {e}", "--quotas") from None

    def landed(self, key: str) -> None:
        """The ingest of ``key`` landed: its repository and bytes counted from now (a usage read
        while it was under way saw neither)."""
        if self.quotas is not None:
            self.quotas.usage.forget(key)

    def admit(self, client: str, key: str, what: str) -> Admitted:
        """One ingest more for ``client`` of the repository ``key`` (``what``: its commit)."""
        rules = self.rules()
        self._namespace_room(rules, 0, f"{what}: not fetched from the upstream")
        with self._lock:
            now = self.clock()
            window = self._window(client, now)
            most = rules.ingests_per_hour
            if most is not None and len(window.starts) >= most:
                raise IngestRateLimited(f"{what}: not fetched from the upstream: this client started {most} "
                                        "ingests in the last hour, the most it may (serve --quotas "
                                        "ingests-per-hour); ask again later", "--quotas",
                                        HOUR - (now - window.starts[0]))
            window.starts.append(now)
        return Admitted(self, client, key)

    def listed(self, client: str, key: str, size: int) -> None:
        """The ingest's files take ``size`` bytes: refused here when that is more than it may."""
        rules = self.rules()
        what = f"{key}: not fetched from the upstream"
        if rules.max_size is not None and size > rules.max_size:
            raise IngestRefused(f"{what}: its files take {human_size(size)}, more than one ingest may "
                                f"({human_size(rules.max_size)}: --upstream-max-size)", "--upstream-max-size")
        self._namespace_room(rules, size, what)
        with self._lock:
            now = self.clock()
            window = self._window(client, now)
            most = rules.bytes_per_hour
            if most is not None and window.bytes() + size > most:
                wait = HOUR - (now - window.fetched[0][0]) if window.fetched else HOUR
                raise IngestRateLimited(f"{what}: this client had the proxy fetch {human_size(window.bytes())} "
                                        f"in the last hour; {human_size(size)} more is past the "
                                        f"{human_size(most)} it may (serve --quotas bytes-per-hour); ask again "
                                        "later", "--quotas", wait)
            window.fetched.append((now, size))
        if self.quotas is not None:
            self.quotas.usage.forget(key)  # its bytes counted once it landed (read again when asked)
