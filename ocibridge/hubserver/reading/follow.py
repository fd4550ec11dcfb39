"""One registry fetch of a blob into the model cache, sent to clients while it arrives.

The blob is fetched by the model cache's own download (pull's: received into buffers, written
at its offset, hashed in order on another thread, renamed once verified). Every client of the
blob follows that one file as its verified-in-order prefix grows, so the first byte goes out
as soon as it is hashed, not after the whole blob is in. The last byte is held back until the
whole blob matched its digest, or, for a fetch checked by the chunk table the readers' manifest
binds, every chunk its table entry: a client of a blob that does not match gets a body cut
short (its client raises) and the model cache gets nothing.

Measured (1 GiB, loopback, docs/benchmarks.md): serve spent 3.2-3.3 s of CPU on a cold
download when it read the blob in 1 MiB pieces through the store's reader, wrote it, and hashed
it a second time on the event loop before each piece was sent; 1.46-1.59 s this way.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from pathlib import Path

import anyio.to_thread

from ocibridge.chunks.tablehash import TableHasher
from ocibridge.errors import DigestMismatch, OcibridgeError

#: bytes read from the file and handed to the server per step (the warm path reads as much)
SEND = 1 << 20


class Fill:
    """A blob on its way into the model cache: how far it is verified, and its file.

    The fetch runs on a thread of its own (:meth:`start`), so it outlives the request that
    started it: a client that goes away leaves the others, and the cache, their blob."""

    def __init__(self, digest: str, size: int, final: Path):
        self.digest = digest
        self.size = size
        self.final = final
        self.generation = 0  # bumped when the download starts over from byte 0
        self.hashed = 0
        self.verified = False
        self.error: BaseException | None = None
        self.hasher: TableHasher | None = None  # set when a chunk table checks the blob as it comes
        self.table_key: str | None = None  # the content key of that table (None: checked by the digest)
        self._fd: int | None = None  # a copy of the download's descriptor, while it runs
        self._lock = threading.Lock()
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        self._due: list[tuple[int, asyncio.Future[None]]] = []  # until(end) waiters, woken when it is verified
        # what the fetching thread wakes the loop for (under the lock): every step while a
        # :func:`spans` follows the file, else only once the first of ``_due`` may go on
        self._followers = 0
        self._first_due: int | None = None

    # -- the fetching thread -----------------------------------------------------------------
    def start(self, fetch: Callable[[Callable[[int, int], None]], None],
              done: Callable[[Fill], None]) -> None:
        """Run ``fetch(on_hashed)`` on a thread; ``done(self)`` on the loop when it ends."""

        def run() -> None:
            error: BaseException | None = None
            try:
                fetch(self._on_hashed)
            except BaseException as e:  # noqa: BLE001 - handed to every follower, which raises it
                error = e
            with self._lock:
                self.verified = error is None
                self.error = error
                if self._fd is not None:
                    os.close(self._fd)
                    self._fd = None
            self._to_loop(self._finish, done)

        threading.Thread(target=run, name=f"fill-{self.digest[7:19]}", daemon=True).start()

    def set_hasher(self, hasher: TableHasher) -> None:
        """The fetching thread's hasher for this start of the download (under the lock, as
        :meth:`checked` reads it)."""
        with self._lock:
            self.hasher = hasher

    def _on_hashed(self, fd: int, upto: int) -> None:
        """A step hashed: the loop is woken only where it has something to do (a follower of
        every step, a waiter whose bytes are verified now). Each wake is a hop to the loop: at
        every step, with none waiting for it (a cold Xet read's xorbs wait for their ends), it
        was ~200 hops a GiB."""
        with self._lock:
            if self._fd is None:
                self._fd = os.dup(fd)
            if upto < self.hashed:
                self.generation += 1
            self.hashed = upto
            due = self._first_due
            wake = self._followers > 0 or (due is not None and (self.hasher is None or self.hasher.verified >= due))
            if due is not None and wake:
                self._first_due = None  # the wake sets the next (_wake): none from the steps before it runs
        if wake:
            self._to_loop(self._wake)

    def _to_loop(self, call: Callable[..., None], *args: object) -> None:
        """``call(*args)`` on the loop, from the fetching thread; nothing once the loop is
        closed. The fetch outlives the requests that follow it (and the server: a stop does not
        wait for a download to end), so it may end after serve's loop closed: its blob is in the
        model cache all the same, and no follower is left to wake."""
        try:
            self._loop.call_soon_threadsafe(call, *args)
        except RuntimeError:  # "Event loop is closed": raised before anything is scheduled
            if not self._loop.is_closed():
                raise

    # -- the loop --------------------------------------------------------------------------
    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
        if not self._due:
            return
        with self._lock:  # the waiters left and the first of them at once, as _on_hashed reads them
            try:
                ready = self._checked(False)  # a waiter for the whole blob re-checks itself (woken early: harmless)
            except Exception:  # noqa: BLE001 - every waiter is woken to raise it itself
                ready = self.size
            woken = [future for end, future in self._due if end <= ready]
            self._due = [(end, future) for end, future in self._due if end > ready]
            self._first_due = min((end for end, _ in self._due), default=None)
        for future in woken:
            if not future.done():
                future.set_result(None)

    def _finish(self, done: Callable[[Fill], None]) -> None:
        done(self)
        self._wake()

    def _raise_if_failed(self) -> None:
        """Raise the fetch's error, as every reader of it does (called under the lock)."""
        if isinstance(self.error, DigestMismatch):
            raise DigestMismatch(f"{self.error}: the connection is cut")
        if self.error is not None:
            raise OcibridgeError(f"blob {self.digest}: {self.error}: the connection is cut")

    def sendable(self) -> int:
        """Bytes a client may have now: the hashed prefix less the last byte until verified."""
        with self._lock:
            self._raise_if_failed()
            return self.size if self.verified else min(self.hashed, self.size - 1)

    async def changed(self) -> None:
        await self._changed.wait()

    def checked(self, whole: bool = False) -> int:
        """Bytes from the first that are verified now: the chunks the table checked so far, or
        none until the whole blob matched its digest (always so with ``whole``); raises if the
        fetch failed."""
        with self._lock:
            return self._checked(whole)

    def _checked(self, whole: bool) -> int:
        """:meth:`checked`, under the lock."""
        self._raise_if_failed()
        if self.verified:
            return self.size
        if whole or self.hasher is None or self._fd is None:  # no file to read from yet
            return 0
        return self.hasher.verified

    async def until(self, end: int, whole: bool = False) -> None:
        """Wait until bytes ``[0, end)`` are verified (:meth:`checked`). Woken only once they are
        (or the fetch failed), not at each piece hashed: many requests of one client wait on one
        fetch, and waking each at every MiB cost serve a third more CPU.

        Once verified, those bytes of the file stay as they are for as long as the reader holds
        a descriptor of it from :meth:`open`, so they may be sent from the file after the check
        (by sendfile) with nothing to confirm: the download never writes below its checked
        prefix, not even when it starts over (it truncates to that prefix: ``stores.partial``);
        a verified file is renamed into place and never written; and every descriptor
        :meth:`open` hands out shares the download's open file, and so its ``flock`` of the
        partial file, which no other download (of this serve or another process) resumes
        without: while a reader holds one, none can write the file."""
        while True:
            future = self._loop.create_future()
            with self._lock:  # checked and made a waiter at once: no step hashed in between goes unseen
                if self._checked(whole) >= end:
                    return
                self._due.append((end, future))
                self._first_due = end if self._first_due is None else min(self._first_due, end)
            await future

    def follow(self, step: int) -> None:
        """A :func:`spans` starts (``step`` 1) or ends (-1) following the file: woken at every step."""
        with self._lock:
            self._followers += step

    def ready(self, end: int, whole: bool = False) -> bool:
        """Whether :meth:`until` would return at once."""
        return self.checked(whole) >= end

    def open(self) -> int:
        """A descriptor of the blob's file: a copy of the download's while it runs (sharing its
        lock: :meth:`until`), else the cache's."""
        held = self.open_held()
        return held if held is not None else os.open(self.final, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def open_held(self) -> int | None:
        """A copy of the download's descriptor while it runs (no file system call), else None."""
        with self._lock:
            return os.dup(self._fd) if self._fd is not None else None


class FillView:
    """A :class:`Fill` as a ``serve.blobs.Checked``: its table's early bytes when the reader's
    manifest binds the same table, else only the whole blob once its digest matched (a fetch
    checked by another table is never followed: ``blobs.Blobs._fill_of``)."""

    def __init__(self, fill: Fill, whole: bool):
        self.fill = fill
        self.whole = whole

    def open(self) -> int:
        return self.fill.open()

    def open_held(self) -> int | None:
        return self.fill.open_held()

    async def until(self, end: int) -> None:
        await self.fill.until(end, self.whole)

    def ready(self, end: int) -> bool:
        return self.fill.ready(end, self.whole)


async def spans(fill: Fill, start: int, end: int) -> AsyncGenerator[tuple[int, int, int], None]:
    """Bytes ``[start, end)`` of the blob as they are verified, as ``(fd, offset, count)`` spans of
    its file (the descriptor is good until the next step): whole pieces of at least :data:`SEND`
    while it arrives, so that sends are few and large. Raises (the connection is cut) if the
    fetch fails, or starts over after bytes were handed out."""
    fd: int | None = None
    generation = fill.generation
    at = start
    fill.follow(1)
    try:
        while at < end:
            ready = min(end, fill.sendable())
            if ready < min(end, at + SEND):  # whole pieces: fewer, larger writes while it arrives
                await fill.changed()
                continue
            if fill.generation != generation:
                if at > start:
                    raise DigestMismatch(f"blob {fill.digest}: the bytes kept from an earlier download did "
                                         "not verify: the connection is cut")
                generation = fill.generation
            if fd is None:
                fd = fill.open()
            yield fd, at, ready - at
            at = ready
    finally:
        fill.follow(-1)
        if fd is not None:
            os.close(fd)


async def follow(fill: Fill, start: int, end: int) -> AsyncIterator[bytes]:
    """Bytes ``[start, end)`` of the blob as they are verified (:func:`spans`), read into memory
    :data:`SEND` at a time."""
    async for fd, at, count in spans(fill, start, end):
        stop = at + count
        while at < stop:
            data = await anyio.to_thread.run_sync(os.pread, fd, min(SEND, stop - at), at)
            if not data:
                raise DigestMismatch(f"blob {fill.digest}: the file ended at byte {at}")
            at += len(data)
            yield data
