"""One writer, enforced: a serve that takes writes holds the *writer lease* of its
first SOURCE, where new repositories go. A registry has no compare-and-swap on a tag, so two
processes that each move one branch lose commits; a second serve with write tokens over the
same prefix therefore refuses writes (the Hub's 503, naming the holder) until the holder's
lease ends, and takes over then.

:class:`Lease` is what the routes ask (:meth:`.app.ServeApp.writing` before a write is taken,
the commit routes before and after a branch's tag moves); this base class is no lease at all:
a reader (``--writer``, whose writes go to the writer), a serve with no source it writes to.
:mod:`.writerlease` keeps one in a registry, :mod:`.layoutlease` in an OCI layout (a lock).
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.replicas.leaserecord import Holder

if TYPE_CHECKING:

    pass


class LeaseLost(OcibridgeError):
    """A write this serve may not take now: another process holds the writer lease, or this
    one's lapsed, or it is not known yet (the Hub's 503, with ``Retry-After``)."""

    def __init__(self, message: str, retry_after: float, holder: Holder | None = None):
        super().__init__(message)
        self.retry_after = max(1, int(retry_after + 0.999))
        self.holder = holder  # the serve that takes writes now, when known (replicas/peers.py)


class Lease:
    """No writer lease: every write is taken here."""

    def start(self, url: str | None = None) -> None:
        """Take the lease, or learn who holds it (``url``: where this serve is reached, named in
        the lease): quickly, so the start line can say which."""

    def standing_by(self) -> str | None:
        """Why writes are refused here, for the start line; None when this serve takes them."""
        return None

    def holding(self) -> bool:
        """Whether writes are taken now (no waiting, no request)."""
        return True

    def holder(self) -> Holder | None:
        """Another serve known to hold the lease while this one stands by; else None."""
        return None

    def admit(self) -> None:
        """Before a write is taken: raises :class:`LeaseLost` unless this serve holds the lease
        (started here when it was not yet; waits while it is being decided)."""

    def ensure(self) -> None:
        """Right before a branch's tag moves: raises :class:`LeaseLost` unless the lease is
        still held (a paused writer whose lease lapsed must not move a branch)."""

    def confirm(self) -> None:
        """Once a branch's tag moved: raises :class:`LeaseLost` unless the lease, read now,
        still names this serve (else the commit is not answered as landed)."""

    def close(self) -> None:
        """Let the lease go (a serve stopped cleanly is replaced at once)."""


def this_process(holder_id: str, url: str | None = None) -> Holder:
    """The holder this process is."""
    return Holder(holder_id, url or "", socket.gethostname(), os.getpid())
