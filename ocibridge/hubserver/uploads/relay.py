"""A large upload sent on to the registry while it arrives: a raw layer's blob is the file's
bytes (its digest is the file's SHA-256, the LFS oid), so the blob a commit's push needs can be
uploaded during the client's own upload instead of after the commit. The commit's push then
finds it there and sends only the config and manifest.

Two ways in. An LFS PUT hands its bytes over in memory as they are received and hashed
(:class:`Handed`): the file is never written on serve's disk nor read back from it, and is staged
as held by the registry (that write and read were ~0.4 s of serve's CPU a GiB, and a
GiB of staging room). A Xet file rebuilt after its shard is written, and read as it is written
(:class:`Following`).

Nothing unverified becomes a blob: the registry takes the upload under the oid's digest and
refuses it (no blob is made) unless the bytes hash to it, and serve checks the same bytes itself
(a handed upload's last byte is given only once serve found they hash to the oid). An upload the
client abandons fails its relay too: the registry's upload session is left unfinished, never a
blob.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import BinaryIO, Generic, TypeVar

from ocibridge.core.pagecache import let_go
from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.repo.sources import RegistrySource, Source, repo_parts
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import WritableStore
from ocibridge.transfer.writer import Blob, write_blob

log = logging.getLogger("ocibridge.hubserver")

#: files from this size are relayed as they arrive (smaller ones go with the commit's push)
RELAY_MIN = 8 * 1024 * 1024
#: seconds a relay may wait for the next bytes of its upload before it gives up
STALL = 300.0


#: bytes read between two calls that let go of what was read (:meth:`Following.readinto`)
LET_GO_STEP = 32 * 1024 * 1024


class Following(io.RawIOBase):
    """Reads a file being written by another party, as far as it was written (waits for more).

    What it has read it lets go of from the page cache once it is on disk
    (:mod:`ocibridge.core.pagecache`): the file is staged, read again only by a commit's header
    read or a push the registry cut, and the pages the writer goes on into are then the ones
    let go a moment ago."""

    def __init__(self, path: Path, size: int) -> None:
        super().__init__()
        self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed with this reader
        self.size = size
        self._cond = threading.Condition()
        self._written = 0
        self._failed: str | None = None
        self._marks = (0, 0)  # where the last two lettings-go reached: before the first, all went

    def grew(self, written: int) -> None:
        with self._cond:
            self._written = written
            self._cond.notify_all()

    def fail(self, why: str) -> None:
        with self._cond:
            self._failed = why
            self._cond.notify_all()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        at = self._file.tell()
        if at >= self.size:
            return 0
        with self._cond:
            if not self._cond.wait_for(lambda: self._written > at or self._failed is not None or at >= self.size,
                                       timeout=STALL):
                raise OSError("the upload stalled")
            if self._failed is not None:
                raise OSError(self._failed)
            if at >= self.size:
                return 0
            ready = self._written - at
        if at - self._marks[1] >= LET_GO_STEP:
            self._let_go(at)
        return self._file.readinto(buffer[:min(len(buffer), ready)])

    def _let_go(self, at: int) -> None:
        """Drop the pages read, from where all went last time: those written back go, the
        others are written back now and go the next time (nothing waits for the disk)."""
        start, middle = self._marks
        let_go(self._file.fileno(), start, at - start)
        self._marks = (middle, at)

    def close(self) -> None:
        self._file.close()
        super().close()


#: bytes of a handed upload that wait for the relay at most: past them, the receiving route waits
#: (and so reads the client no faster than the registry takes the bytes)
HANDED_MAX = 4 * 1024 * 1024


class Handed(io.RawIOBase):
    """An upload's bytes, handed over by the route that receives them (:meth:`put`, on the event
    loop, once a worker thread hashed them), read by the relay's thread; at most
    :data:`HANDED_MAX` wait, and the route waits on the loop, not on a thread (uploads waiting for
    a slow registry must not hold the worker threads every other request needs).
    The last byte is read only after :meth:`end` gave the route's verdict on the whole: None (the
    bytes hash to the oid) ends the upload; a reason cuts it (the read fails), so the registry
    makes no blob of bytes serve did not check. Once the relay is over (:meth:`close`: it failed,
    or the registry had the blob), what is handed is dropped."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self._cond = threading.Condition()
        self._parts: deque[memoryview] = deque()
        self._held = 0  # bytes handed, not read yet
        self._given = 0  # bytes read
        self._verdict: tuple[str | None] | None = None  # (None,): the bytes hash to the oid
        self._over = False  # the relay read its last (closed)
        self._waiting: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None  # the route's

    async def put(self, pieces: Sequence[bytes]) -> None:
        """Hand ``pieces`` over, waiting (on the loop) while the relay is :data:`HANDED_MAX` behind."""
        while True:
            with self._cond:
                if self._over:
                    return
                if self._held < HANDED_MAX:
                    for piece in pieces:
                        if piece:
                            self._parts.append(memoryview(piece))
                            self._held += len(piece)
                    self._cond.notify_all()
                    return
                loop = asyncio.get_running_loop()
                room = loop.create_future()
                self._waiting = (loop, room)
            try:
                await asyncio.wait_for(room, STALL)
            except asyncio.TimeoutError:
                raise OSError("the registry took none of the upload for a long time") from None

    def _room(self) -> None:
        """Wake the route waiting for room, if it is (called with the lock held)."""
        if self._waiting is not None:
            loop, room = self._waiting
            self._waiting = None
            with contextlib.suppress(RuntimeError):  # its loop closed: nobody waits any more
                loop.call_soon_threadsafe(_settle, room)

    def end(self, why_not: str | None) -> None:
        """The route's verdict, once every byte was handed: None, they hash to the oid; else why
        not (the upload is cut)."""
        with self._cond:
            self._verdict = (why_not,)
            self._cond.notify_all()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        with self._cond:
            while True:
                ok = self._verdict == (None,)
                if self._verdict is not None and not ok:
                    raise OSError(self._verdict[0])
                # every byte but the last as it comes; the last once the verdict is that all is well
                room = min(len(view), self._held, self.size - self._given - (0 if ok else 1))
                if room > 0:
                    taken = self._copy(view, room)
                    self._room()
                    return taken
                if ok and not self._held:
                    return 0
                if not self._cond.wait_for(partial(self._moved, self._held, self._verdict), STALL):
                    raise OSError("the upload stalled")

    def _moved(self, held: int, verdict: tuple[str | None] | None) -> bool:
        """Whether bytes were handed, or the verdict given, since ``held`` and ``verdict``."""
        return self._held != held or self._verdict != verdict

    def _copy(self, view: memoryview, room: int) -> int:
        taken = take_parts(self._parts, view[:room])
        self._held -= taken
        self._given += taken
        return taken

    def close(self) -> None:
        with self._cond:
            self._over = True
            self._parts.clear()
            self._held = 0
            self._room()
            self._cond.notify_all()
        super().close()


def take_parts(parts: deque[memoryview], into: memoryview) -> int:
    """Copy the first bytes of ``parts`` into ``into``, as many as both have; the parts copied
    whole leave the queue, one copied in part stays as its rest. How many were copied."""
    taken = 0
    while parts and taken < len(into):
        part = parts[0]
        n = min(len(part), len(into) - taken)
        into[taken:taken + n] = part[:n]
        taken += n
        if n == len(part):
            parts.popleft()
        else:
            parts[0] = part[n:]
    return taken


def _settle(room: asyncio.Future[None]) -> None:
    if not room.done():
        room.set_result(None)


_Reader = TypeVar("_Reader", Following, Handed)


class Relay(Generic[_Reader]):
    """One upload's relay: a thread pushing the blob ``sha256`` to ``store`` from ``follow``."""

    def __init__(self, store: WritableStore, sha256: str, size: int, follow: _Reader) -> None:
        self.follow: _Reader = follow
        self.desc = Descriptor(mediaType="application/octet-stream", digest=f"sha256:{sha256}", size=size)
        self.store = store
        self.error: Exception | None = None
        self._opened = False
        self._thread = threading.Thread(target=self._run, name=f"relay-{sha256[:12]}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            # the one writer: unless the registry has it; read once (a cut upload fails saying how)
            write_blob(self.store, Blob(self.desc, self._reader), rereadable=False)
        except Exception as e:  # noqa: BLE001 - the commit's push sends the blob itself then
            self.error = e
            # a handed upload is not kept here: its route answers 502, and the client sends it again
            then = "" if isinstance(self.follow, Handed) else " (the commit's push sends it)"
            log.info("relay of %s to %s: %s%s", self.desc.digest, self.store.describe(), e, then)
        finally:
            self.follow.close()

    def _reader(self) -> BinaryIO:
        """The upload as it arrives, once: a relay cannot go back to its start (an upload the
        registry cut fails: a Xet file's commit push sends it, an LFS PUT is answered 502)."""
        if self._opened:
            raise OcibridgeError(f"relay of {self.desc.digest}: the upload cannot be read again")
        self._opened = True
        return io.BufferedReader(self.follow, 1 << 20)

    def wait(self) -> None:
        self._thread.join()


#: a relay of a large upload (the repository, the SHA-256, the size, the file being written), or
#: None where there is nowhere to relay to: :func:`relay_for` over the first source
RelayFor = Callable[[str, str, int, Path], "Relay[Following] | None"]
#: the same for an upload handed over in memory (the repository, the SHA-256, the size):
#: :func:`handing_for` over the first source
HandingFor = Callable[[str, str, int], "Relay[Handed] | None"]


def relay_for(source: Source | None, repo_id: str, oid: str, size: int, tmp: Path) -> Relay[Following] | None:
    """A relay of a large file being written at ``tmp`` (a Xet file rebuilt) to the registry
    repository its commit will push to (``source``: the first source), when that is a registry."""
    store = registry_store(source, repo_id) if size >= RELAY_MIN else None
    return Relay(store, oid, size, Following(tmp, size)) if store is not None else None


def handing_for(source: Source | None, repo_id: str, oid: str, size: int) -> Relay[Handed] | None:
    """A relay of a large LFS upload, handed over in memory, to the registry repository its
    commit will push to, when that is a registry (else None: the upload is staged on disk)."""
    store = registry_store(source, repo_id) if size >= RELAY_MIN else None
    return Relay(store, oid, size, Handed(size)) if store is not None else None


def relays(source: Source | None, repo_id: str, size: int) -> bool:
    """Whether an upload of ``size`` bytes for ``repo_id`` is relayed (:func:`handing_for`), so
    takes no room in staging."""
    return size >= RELAY_MIN and registry_store(source, repo_id) is not None


def registry_store(source: Source | None, repo_id: str) -> WritableStore | None:
    """The registry repository a commit of ``repo_id`` will push to, when ``source`` (the first
    source) is a registry."""
    parts = repo_parts(repo_id)
    if parts is None or not isinstance(source, RegistrySource):
        return None
    repo = source.repository(parts)
    return repo.store if repo is not None and isinstance(repo.store, WritableStore) else None
