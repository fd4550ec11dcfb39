"""Writing an upload's pieces on a worker thread while the next piece is received.

An LFS PUT's bytes are hashed twice (the SHA-256 staging checks, push's chunk table) and
written as they come. Awaited piece by piece, that work stops the request's reading: uvicorn
pauses the socket while its body buffer is full, so the client's send waited for every MiB's
hashing (1 GiB: about 1.2 s of SHA-256 done while nothing was received). One write in flight,
in order, lets the event loop take in the next MiB meanwhile: the same bytes, hashed and written
in the same order, so what is verified is unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class WriteBehind:
    """At most one write in flight; each starts after the one before it ended (file order).

    ``write(data)`` is the awaitable that writes ``data`` (on a thread); ``landed(upto)`` is told
    how many bytes are written once a write ends (a relay follows the file that far)."""

    def __init__(self, write: Callable[[bytes], Awaitable[object]], landed: Callable[[int], None] | None = None):
        self._write = write
        self._landed = landed
        self._flight: tuple[asyncio.Future[object], int] | None = None

    async def submit(self, data: bytes, upto: int) -> None:
        """Write ``data`` (the file then ``upto`` bytes long) once the write before it ended."""
        await self.drain()
        self._flight = (asyncio.ensure_future(self._write(data)), upto)

    async def drain(self) -> None:
        """Wait for the write in flight (its error raised here)."""
        if self._flight is None:
            return
        task, upto = self._flight
        self._flight = None
        await task
        if self._landed is not None:
            self._landed(upto)

    async def settle(self) -> None:
        """Wait for the write in flight, its error dropped: the upload is failing already, and the
        file may be closed only once no thread writes it."""
        if self._flight is None:
            return
        task, _ = self._flight
        self._flight = None
        await asyncio.gather(asyncio.shield(task), return_exceptions=True)
