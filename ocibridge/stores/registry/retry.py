"""The retry layer: failed connections and 408/429/5xx answers are sent again, with backoff.

Full-jitter exponential backoff, or exactly what ``Retry-After`` asks (capped). Only requests
whose policy allows it are retried: a streamed body cannot be replayed, so its caller (the
upload) owns recovery. Failures no retry can mend (refused, unresolvable, untrusted) end at once
(unreachable.py).
"""

from __future__ import annotations

import email.utils
import random
import time

import httpx

from ocibridge.core import interrupt
from ocibridge.core.httpheaders import header_int
from ocibridge.stores.registry.stats import TransferStats
from ocibridge.stores.registry.transport import Layer, discard, policy_of
from ocibridge.stores.registry.unreachable import Outage, classify

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class TransportFailure(Outage):
    """The connection failed (refused, reset, timed out) rather than the registry answering:
    nothing answered, after every retry (an :class:`Outage`)."""


class Backoff:
    """How long to wait before attempt ``n + 1``; ``max_retries`` attempts after the first."""

    def __init__(self, max_retries: int = 5, base: float = 0.5, cap: float = 30.0,
                 retry_after_cap: float = 60.0):
        self.max_retries = max_retries
        self.base = base
        self.cap = cap
        self.retry_after_cap = retry_after_cap

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry_after_cap)
        return random.uniform(0, min(self.cap, self.base * 2**attempt))


class RetryTransport(Layer):
    """Sends a request again while the failure is worth it and attempts are left."""

    def __init__(self, inner: httpx.BaseTransport, host: str, backoff: Backoff, stats: TransferStats):
        super().__init__(inner)
        self.host = host
        self.backoff = backoff
        self.stats = stats

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        retry = policy_of(request).retry
        attempt = 0
        while True:
            interrupt.check()
            try:
                response = self.inner.handle_request(request)
            except httpx.TransportError as e:
                interrupt.check()  # the interrupt shut the socket down: no retry
                fatal = classify(self.host, str(request.url), e)
                if fatal is not None:
                    raise fatal from None
                if not retry or attempt >= self.backoff.max_retries:
                    raise TransportFailure(
                        f"registry {self.host}: {request.method} {request.url.path} failed: {_one_line(e)}"
                    ) from e
                self.sleep(attempt, None)
                attempt += 1
                continue
            if response.status_code in RETRY_STATUSES and retry and attempt < self.backoff.max_retries \
                    and not quota_exhausted(response):
                wait = retry_after_seconds(response.headers.get("retry-after"))
                discard(response)
                self.sleep(attempt, wait)
                attempt += 1
                continue
            return response

    def sleep(self, attempt: int, retry_after: float | None) -> None:
        """Wait before attempt ``attempt + 1``, counted as a retry (uploads that own their
        recovery wait here too)."""
        self.stats.add(retries=1)
        interrupt.sleep(self.backoff.delay(attempt, retry_after))


def quota_exhausted(response: httpx.Response) -> bool:
    """A 429 that says its quota is spent for a window (Docker Hub's pull limit:
    ``RateLimit-Remaining: 0;w=21600``) and names no ``Retry-After``: retrying within
    seconds cannot help, so the error is reported at once, naming the limit."""
    if response.status_code != 429 or response.headers.get("retry-after"):
        return False
    remaining = str(response.headers.get("ratelimit-remaining", "")).split(";", 1)[0].strip()
    return remaining == "0"


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds or an HTTP date; None when absent or unparseable."""
    if not value:
        return None
    value = value.strip()
    seconds = header_int(value)
    if seconds is not None:
        return float(seconds)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _one_line(e: BaseException) -> str:
    return " ".join((str(e) or type(e).__name__).split())
