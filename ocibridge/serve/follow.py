"""One registry fetch of a blob into the model cache, sent to clients while it arrives.

The blob is fetched by the model cache's own download (pull's: received into buffers, written
at its offset, hashed in order on another thread, renamed once verified). Every client of the
blob follows that one file as its verified-in-order prefix grows, so the first byte goes out
as soon as it is hashed, not after the whole blob is in. The last byte is held back until the
whole blob matched its digest: a client of a blob that does not match gets a body cut short
(its client raises) and the model cache gets nothing.

Measured (1 GiB, loopback, docs/benchmarks.md): serve spent 3.2-3.3 s of CPU on a cold
download when it read the blob in 1 MiB pieces through the store's reader, wrote it, and hashed
it a second time on the event loop before each piece was sent; 1.46-1.59 s this way.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio.to_thread

from ocibridge.errors import DigestMismatch, OcibridgeError
from ocibridge.remote.tablehash import TableHasher

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
        self.hasher: TableHasher | None = None  # set when the chunk table checks the blob as it comes
        self._fd: int | None = None  # a copy of the download's descriptor, while it runs
        self._lock = threading.Lock()
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()

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
            self._loop.call_soon_threadsafe(self._finish, done)

        threading.Thread(target=run, name=f"fill-{self.digest[7:19]}", daemon=True).start()

    def _on_hashed(self, fd: int, upto: int) -> None:
        with self._lock:
            if self._fd is None:
                self._fd = os.dup(fd)
            if upto < self.hashed:
                self.generation += 1
            self.hashed = upto
        self._loop.call_soon_threadsafe(self._wake)

    # -- the loop --------------------------------------------------------------------------
    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _finish(self, done: Callable[[Fill], None]) -> None:
        done(self)
        self._wake()

    def sendable(self) -> int:
        """Bytes a client may have now: the hashed prefix less the last byte until verified."""
        with self._lock:
            if isinstance(self.error, DigestMismatch):
                raise DigestMismatch(f"{self.error}: the connection is cut")
            if self.error is not None:
                raise OcibridgeError(f"blob {self.digest}: {self.error}: the connection is cut")
            return self.size if self.verified else min(self.hashed, self.size - 1)

    async def changed(self) -> None:
        await self._changed.wait()

    def checked(self) -> int:
        """Bytes from the first that are verified now: the chunks the table checked so far, or
        none until the whole blob matched its digest; raises if the fetch failed."""
        self.sendable()
        with self._lock:
            if self.verified:
                return self.size
            if self.hasher is None or self._fd is None:  # no file to read from yet
                return 0
            return self.hasher.verified

    async def until(self, end: int) -> None:
        """Wait until bytes ``[0, end)`` are verified (:meth:`checked`)."""
        while self.checked() < end:
            await self.changed()

    def open(self) -> int:
        """A descriptor of the blob's file: the download's while it runs, else the cache's."""
        with self._lock:
            if self._fd is not None:
                return os.dup(self._fd)
        return os.open(self.final, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)


async def follow(fill: Fill, start: int, end: int) -> AsyncIterator[bytes]:
    """Bytes ``[start, end)`` of the blob as they are verified; raises (the connection is cut)
    if it fails, or starts over after bytes were sent."""
    fd: int | None = None
    generation = fill.generation
    at = start
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
            data = await anyio.to_thread.run_sync(os.pread, fd, min(SEND, ready - at), at)
            if not data:
                raise DigestMismatch(f"blob {fill.digest}: the file ended at byte {at}")
            at += len(data)
            yield data
    finally:
        if fd is not None:
            os.close(fd)
