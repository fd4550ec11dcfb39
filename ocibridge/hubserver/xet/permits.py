"""Turns to read xorb bodies: at most so many are read at once, over every writer,
and of those at most a share by one writer (:class:`..guard.Shares`). hf_xet opens more uploads
as a large file goes on (8 to 19-20 over 4 GiB), each holding a piece of its body in serve's
memory while it is read; an upload past the permits waits, unread, its bytes in the kernel's
socket buffers, so serve's memory does not grow with the client's concurrency.

A permit is held while the body moves, not while its client is silent: an upload whose body
has not moved for :data:`STALL` seconds gives its permit back (one that sends headers and then
nothing would otherwise keep it as long as its connection lasts, and a few such uploads would
hold every permit), and takes one again before it reads on (at most a piece is read without one).
"""

from __future__ import annotations

import asyncio

from ocibridge.hubserver.guard import Shares

#: seconds without a byte of the body after which an upload gives its permit back
STALL = 2.0


class ReadPermit:
    """One upload's turn among the readers of ``shares``, as ``writer``."""

    def __init__(self, shares: Shares, writer: str) -> None:
        self.shares, self.writer = shares, writer
        self.held = False
        self._moved = 0  # pieces read (or handled) since the watch began
        self._seen = -1
        self._watch: asyncio.TimerHandle | None = None

    async def take(self) -> None:
        """Wait for a permit (none is taken twice)."""
        if not self.held:
            await self.shares.take(self.writer)
            self.held = True
            self._seen = -1
            self._arm()

    async def moved(self) -> None:
        """The body moved (a piece read, or handled): go on with a permit (taken again if given back)."""
        self._moved += 1
        if not self.held:
            await self.take()

    def note_moved(self) -> None:
        """The body moved, told where nothing may wait (:mod:`.diverted`: the caller takes a
        permit again itself when :attr:`held` is False)."""
        self._moved += 1

    def give(self) -> None:
        """The body is read (or given up): the permit back, the watch ended."""
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self.held:
            self.held = False
            self.shares.give(self.writer)

    def _arm(self) -> None:
        self._watch = asyncio.get_running_loop().call_later(STALL, self._check)

    def _check(self) -> None:
        """Every :data:`STALL` seconds: still moving, or the permit goes back."""
        self._watch = None
        if not self.held:
            return
        if self._moved == self._seen:
            self.held = False
            self.shares.give(self.writer)  # taken again at the next piece
            return
        self._seen = self._moved
        self._arm()
