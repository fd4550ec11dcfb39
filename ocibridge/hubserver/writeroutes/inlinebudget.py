"""The bytes of inline commit lines serve holds at once, over every commit.

A commit's file sent inline (a base64 ``file`` line of the NDJSON payload, up to
:data:`.commits.LINE_MAX`) is held whole while it is read: the line as it arrives, its copy, the
parsed text, the decoded content, about :data:`COPIES` times the line. Nothing else bounds how
many are held together (Xet bodies have their read permits, :mod:`..xet.permits`), so 160 commits
of one 16 MiB line each took serve to 932 MiB. Here a commit whose line grows past
:data:`SMALL` takes a reservation of what its longest line may cost (``COPIES`` x the body's
declared length, or x ``LINE_MAX`` when it declares none) out of a budget shared by every commit
(``$OCIBRIDGE_SERVE_INLINE_BUDGET``, default :data:`DEFAULT_BUDGET`), all of it at once so
that no two commits each hold part and wait for the rest, and keeps it until its payload is read.
A commit that cannot get its reservation within :data:`WAIT` seconds is refused: a 503 with
``Retry-After`` (:class:`InlineBusy`, failures.py), its body unread. Waiting commits are served
first come, first served, their bodies left in the kernel's socket buffers meanwhile.
"""

from __future__ import annotations

import asyncio
import collections

from starlette.requests import Request

from ocibridge.core.environment import SERVE_INLINE_BUDGET
from ocibridge.core.limits import env_limit
from ocibridge.errors import OcibridgeError

#: what serve holds at most of inline lines in flight, over every commit (4 lines of 16 MiB)
DEFAULT_BUDGET = 256 * 1024 * 1024
#: the memory a line costs while it is read, in multiples of its length
COPIES = 4
#: the part of a line held without a reservation (a commit of small files needs none)
SMALL = 256 * 1024
#: seconds a commit waits for its reservation before it is refused
WAIT = 10.0
#: seconds a refused client is told to wait before it tries again
RETRY_AFTER = 5


class InlineBusy(OcibridgeError):
    """No budget for a commit's inline line within :data:`WAIT` seconds: a 503 with Retry-After."""

    retry_after = RETRY_AFTER


class InlineBudget:
    """Bytes of inline lines held by commits, at most ``total``; reservations in arrival order."""

    def __init__(self, total: int | None = None, wait: float = WAIT) -> None:
        self.total = total if total is not None else env_limit(SERVE_INLINE_BUDGET, DEFAULT_BUDGET)
        self.wait = wait
        self.held = 0
        self._queue: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    async def take(self, size: int) -> int:
        """Reserve ``size`` bytes (at most the whole budget); the bytes reserved. Waits its turn
        behind earlier askers; :class:`InlineBusy` past :attr:`wait` seconds."""
        size = min(size, self.total)
        if not self._queue and self.held + size <= self.total:
            self.held += size
            return size
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, turn)
        self._queue.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(turn), self.wait)
        except asyncio.TimeoutError:
            if not turn.done():
                self._queue.remove(entry)
                self._grant()  # (an asker behind this one may fit now)
                raise InlineBusy(f"serve holds as many inline commit bytes as it may ({self.total}); "
                                 f"retry in {RETRY_AFTER} seconds") from None
        except asyncio.CancelledError:
            if turn.done():
                self.give(size)
            else:
                self._queue.remove(entry)
                self._grant()
            raise
        return size

    def give(self, size: int) -> None:
        """Give back a reservation of ``size`` bytes."""
        self.held -= size
        self._grant()

    def _grant(self) -> None:
        while self._queue and self.held + self._queue[0][0] <= self.total:
            size, turn = self._queue.popleft()
            self.held += size
            turn.set_result(None)


class InlineHold:
    """One commit's reservation: taken once its line grows past :data:`SMALL`, given back by
    :meth:`close` when its payload is read (or refused)."""

    def __init__(self, budget: InlineBudget, declared: int | None, line_max: int) -> None:
        self.budget = budget
        self.need = COPIES * min(declared if declared is not None else line_max, line_max)
        self.reserved = 0

    async def pending(self, size: int) -> None:
        """The line being read holds ``size`` bytes: reserve before more is read past :data:`SMALL`."""
        if size > SMALL and not self.reserved:
            self.reserved = await self.budget.take(self.need)

    def close(self) -> None:
        reserved, self.reserved = self.reserved, 0
        if reserved:
            self.budget.give(reserved)


def declared_length(request: Request) -> int | None:
    """The body's Content-Length, when it declares a sane one."""
    value = request.headers.get("content-length", "")
    return int(value) if value.isdigit() and len(value) < 20 else None
