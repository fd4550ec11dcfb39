"""How long the writer lease lasts (:mod:`.writerlease`), in one value: the expiry a serve that
waits for the lease counts, how often the holder renews it, and how long a serve that wrote it
waits before reading it back (the registry has no compare-and-swap: of two serves that write it
at once, the later write wins, and each must look only once both have landed).

The defaults suit production; the environment's serve-lease variables (core/environment.py,
seconds) change them, for tests that must see a takeover in seconds. The issue that asked for
the lease (76) bounds the expiry at 60 s: a dead writer is replaced within about a minute."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ocibridge.core import environment
from ocibridge.errors import UsageError

#: the most a lease may last unrenewed, whatever a record or the environment says
EXPIRY_MAX = 60.0
ENV = {"expiry": environment.SERVE_LEASE_EXPIRY, "renew": environment.SERVE_LEASE_RENEW,
       "settle": environment.SERVE_LEASE_SETTLE}


@dataclass(frozen=True)
class LeaseTimes:
    """Seconds: ``expiry`` (a lease seen unchanged this long is free), ``renew`` (the holder
    rewrites it this often, and stops taking writes once ``expiry - renew`` passed since its
    last renewal began: the margin a paused holder has), ``settle`` (write, wait, read back)."""

    expiry: float = 30.0
    renew: float = 10.0
    settle: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.expiry <= EXPIRY_MAX:
            raise UsageError(f"{ENV['expiry']}={self.expiry:g}: expected seconds above 0, at most {EXPIRY_MAX:g}")
        if not 0 < self.renew * 3 <= self.expiry:
            raise UsageError(f"{ENV['renew']}={self.renew:g}: expected seconds above 0, at most a third of the "
                             f"expiry ({self.expiry:g})")
        if not 0 < self.settle * 2 <= self.renew:
            raise UsageError(f"{ENV['settle']}={self.settle:g}: expected seconds above 0, at most half the "
                             f"renewal period ({self.renew:g})")

    @classmethod
    def from_env(cls) -> LeaseTimes:
        """The defaults, each replaced by its environment variable where set; a value that is not
        a number, or times that do not fit together, are one error line (a UsageError)."""
        found: dict[str, float] = {}
        for name, variable in ENV.items():
            text = os.environ.get(variable, "").strip()
            if not text:
                continue
            try:
                found[name] = float(text)
            except ValueError:
                raise UsageError(f"{variable}={text!r}: expected a number of seconds") from None
        return cls(**found)
