"""A xorb body taken as the HTTP parser hands it over, not as ASGI messages: the
protocol (:data:`..guard.DIVERT`, :meth:`..protocol.GuardedProtocol.divert`) feeds each piece to
a :class:`DivertedBody` on the event loop's thread, which gathers :data:`.upload.WRITE_PIECE`
bytes and hands them to a writer thread, where they are written and checked
(:class:`.xorbcheck.XorbCheck`); the loop goes on reading meanwhile and is woken by the writer
only when it waits for it. Through ASGI each ~256 KiB piece was copied twice more by uvicorn,
woke the route's task, went through every middleware, and each 512 KiB cost a thread hop there
and back (anyio's, 61 us of CPU each): serve's CPU a GiB published over Xet is ~0.18 s less this
way (median of 20 paired uploads, docs/benchmarks.md).

What the ASGI way kept is kept: at most a piece being gathered and one being written per upload
(reading pauses while the writer is behind), the body read only while its
:class:`.permits.ReadPermit` is held (a body that stalled takes one again before it is read on),
the guard's limit on the body (its :class:`..guard.BodyTooLarge`, answered as before) and the
metrics' count of bytes received (:data:`..guard.BODY_READ`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import BinaryIO

from starlette.requests import ClientDisconnect

from ocibridge.hubserver.guard import BodyTooLarge
from ocibridge.hubserver.xet.permits import ReadPermit
from ocibridge.hubserver.xet.xorbcheck import XorbCheck


class TooLarge(Exception):
    """The body went past the route's own limit."""


class DivertedBody:
    """One xorb body, fed by the protocol (:class:`..protocol.BodySink`), written to ``out``
    and checked by ``check`` (``write(out, pieces, check)``) on ``writers``, ``piece`` bytes at
    a time; :meth:`taken` waits for the end."""

    def __init__(self, out: BinaryIO, check: XorbCheck, writers: Executor, *, limit: int, guard_limit: int | None,
                 permit: ReadPermit | None, write: Callable[[BinaryIO, list[bytes], XorbCheck], None],
                 piece: int) -> None:
        self.out, self.check, self.writers, self.write, self.piece = out, check, writers, write, piece
        self.limit, self.guard_limit, self.permit = limit, guard_limit, permit
        self.size = 0
        self._loop = asyncio.get_running_loop()
        self._pending: list[bytes] = []
        self._held = 0
        self._lock = threading.Lock()
        self._writing = False  # a piece on the writer (under the lock: the writer clears it)
        self._free = threading.Event()  # set while no piece is on the writer
        self._free.set()
        self._waiting = False  # the loop waits for the writer: it calls back (under the lock)
        self._error: BaseException | None = None  # the writer's
        self._ended = False
        self._over = False  # an answer was decided: what comes is dropped
        self._paused_for_writer = False
        self._retaking: asyncio.Task[None] | None = None
        self._pace: tuple[Callable[[], None], Callable[[], None]] | None = None
        self._done: asyncio.Future[int] = self._loop.create_future()
        self._idle_waiter: asyncio.Future[None] | None = None

    def attach(self, pace: tuple[Callable[[], None], Callable[[], None]]) -> None:
        """The connection's ``(pause, resume)`` of reading, from the protocol's divert."""
        self._pace = pace

    # -- the protocol's side (on the loop) ---------------------------------------------------------
    def feed(self, data: bytes) -> None:
        if self._over:
            return
        self.size += len(data)
        if self.guard_limit is not None and self.size > self.guard_limit:
            self._finish(BodyTooLarge())
            return
        if self.size > self.limit:
            self._finish(TooLarge())
            return
        if self.permit is not None:
            self.permit.note_moved()
            if not self.permit.held and self._retaking is None:  # it stalled and gave its permit back
                self._pause()
                self._retaking = self._loop.create_task(self._retake())
        self._pending.append(data)
        self._held += len(data)
        if self._held >= self.piece and not self._hand():
            self._paused_for_writer = True
            self._pause()

    def end(self) -> None:
        if not self._over:
            self._ended = True
            self._settle()

    def lost(self) -> None:
        self._finish(ClientDisconnect())

    # -- the route's side ------------------------------------------------------------------------
    async def taken(self) -> int:
        """Wait until the body is written and checked (its size), or failed: raises what the
        ASGI way raised (:class:`ClientDisconnect`, the writer's OSError, :class:`BodyTooLarge`),
        :class:`TooLarge` past ``limit``. The writer is idle when it returns, whichever way."""
        try:
            return await self._done
        finally:
            self._over = True
            self._done.cancel()  # (cancelled itself: the writer's call back then only wakes _idle)
            if self._retaking is not None:
                self._retaking.cancel()
            await self._idle()

    # -- within ------------------------------------------------------------------------------------
    def _pause(self) -> None:
        if self._pace is not None:
            self._pace[0]()

    def _resume(self) -> None:
        if self._pace is not None and not self._paused_for_writer and self._retaking is None and not self._over:
            self._pace[1]()

    async def _retake(self) -> None:
        assert self.permit is not None
        await self.permit.take()
        self._retaking = None
        self._resume()

    def _hand(self) -> bool:
        """The pieces gathered to the writer, unless it is busy (it calls back then: False)."""
        with self._lock:
            if self._writing:
                self._waiting = True
                return False
            if self._error is not None:
                self._loop.call_soon(self._settle)
                return False
            self._writing = True
            self._free.clear()
        pieces, self._pending, self._held = self._pending, [], 0
        self.writers.submit(self._write, pieces)
        return True

    def _write(self, pieces: list[bytes]) -> None:
        """On a writer thread: write and check ``pieces``; wake the loop if it waits."""
        try:
            self.write(self.out, pieces, self.check)
        except BaseException as e:  # noqa: BLE001 - given to the route, which raises it
            self._error = e
        with self._lock:
            self._writing = False
            self._free.set()
            wake, self._waiting = self._waiting, False
        if wake or self._error is not None:
            self._loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        """On the loop, once the writer is free (or the body ended): go on."""
        self._wake_idle()
        if self._done.done():
            return
        if self._error is not None:
            self._finish(self._error)
            return
        if self._pending and (self._ended or self._held >= self.piece) and not self._hand():
            return  # called back once that piece is written
        if self._paused_for_writer:
            self._paused_for_writer = False
            self._resume()
        if self._ended:
            with self._lock:
                if self._writing:
                    self._waiting = True
                    return
            if self._error is not None:
                self._finish(self._error)
                return
            self._over = True
            self._done.set_result(self.size)

    def _finish(self, failure: BaseException) -> None:
        self._over = True
        self._pending, self._held = [], 0
        if not self._done.done():
            self._done.set_exception(failure)

    async def _idle(self) -> None:
        """Until no piece is on the writer (``out`` is not closed under it); cancelled, it waits
        for the writer all the same (a piece's write, a moment), as anyio's hop did."""
        while True:
            with self._lock:
                if not self._writing:
                    return
                self._waiting = True
                self._idle_waiter = self._loop.create_future()
            try:
                await self._idle_waiter
            except asyncio.CancelledError:
                self._free.wait()
                raise

    def _wake_idle(self) -> None:
        if self._idle_waiter is not None and not self._idle_waiter.done():
            self._idle_waiter.set_result(None)
