"""``--limit-rate``: one byte budget per second shared by every transfer of the process.

A token bucket: each chunk sent or received takes its size from the bucket and waits until
the bucket has refilled enough. Shared, so parts in flight and blobs in parallel together stay
under the cap, as curl's ``--limit-rate`` does for one transfer. :class:`RateLimitTransport`
is the client's layer that meters every body.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx

from ocibridge.core import interrupt
from ocibridge.stores.registry.options import ByteBudget
from ocibridge.stores.registry.transport import Layer

#: The largest burst, in seconds' worth of the rate: small, so that a transfer of a few
#: seconds is held near the cap from its start (a full second's burst made a 4 s transfer run
#: at 1.25× the cap), never under what one read hands over.
BURST_SECONDS = 0.25
MIN_BURST = 16 * 1024


class RateLimit:
    """At most ``rate`` bytes per second on average, bursts of at most ``BURST_SECONDS``."""

    def __init__(self, rate: int):
        if rate < 1:
            raise ValueError("the rate must be at least 1 byte per second")
        self.rate = rate
        self.burst = float(max(MIN_BURST, rate * BURST_SECONDS))
        self._lock = threading.Lock()
        self._available = self.burst
        self._stamp = time.monotonic()

    def take(self, n: int) -> None:
        """Account ``n`` bytes, sleeping as long as the budget asks.

        An interrupt ends the wait early without raising: the bytes in hand go out, and the
        request they belong to decides (an upload chunk spared by the interrupt ends cleanly
        at its next piece; any other sees the interrupt at its own check). Raising here cut a
        PATCH mid-body, and distribution then refuses the session ("upload resumed at wrong
        offset"): the whole blob went again."""
        with self._lock:
            now = time.monotonic()
            self._available = min(self.burst, self._available + (now - self._stamp) * self.rate)
            self._stamp = now
            self._available -= n
            wait = -self._available / self.rate if self._available < 0 else 0.0
        if wait > 0:
            interrupt.CANCELLED.wait(wait)



_SHARED: dict[int, RateLimit] = {}
_SHARED_LOCK = threading.Lock()


def budget_for(rate: int | None) -> RateLimit | None:
    """The process's one budget for ``rate``: every client, connection and part of a command
    draws from it, so a copy between two registries (two clients) stays under the cap with
    both directions together. A call that must not share its cap with others of the process
    (a mirror run) hands its clients a :class:`RateLimit` of its own (``rate_budget``)."""
    if not rate:
        return None
    with _SHARED_LOCK:
        budget = _SHARED.get(rate)
        if budget is None:
            budget = _SHARED[rate] = RateLimit(rate)
        return budget


class RateLimitTransport(Layer):
    """The ``--limit-rate`` layer: every body byte sent or received, of every request of
    the client, takes from the budget as it passes (uploads, downloads, manifests alike)."""

    def __init__(self, inner: httpx.BaseTransport, budget: ByteBudget):
        super().__init__(inner)
        self.budget = budget

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        metered = httpx.Request(request.method, request.url, headers=request.headers.raw,
                                stream=_Metered(request.stream, self.budget),
                                extensions=request.extensions)
        response = self.inner.handle_request(metered)
        response.request = request  # the layers above read what they sent
        response.stream = _Metered(response.stream, self.budget)
        return response


class _Metered(httpx.SyncByteStream):
    """A body whose chunks wait for the budget; iterable again when the body it wraps is (a
    retried request sends its bytes again)."""

    def __init__(self, stream: httpx.SyncByteStream | httpx.AsyncByteStream, budget: ByteBudget):
        self._stream = stream
        self._budget = budget

    def __iter__(self) -> Iterator[bytes]:
        assert isinstance(self._stream, httpx.SyncByteStream)  # a sync client's bodies
        for chunk in self._stream:
            self._budget.take(len(chunk))
            yield chunk

    def close(self) -> None:
        if isinstance(self._stream, httpx.SyncByteStream):
            self._stream.close()
