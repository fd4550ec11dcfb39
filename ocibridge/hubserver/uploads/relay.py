"""An LFS upload sent on to the registry while it arrives: a raw layer's blob is the file's bytes
(its digest is the file's SHA-256, the LFS oid), so the blob a commit's push needs can be
uploaded during the client's own upload instead of after the commit. The commit's push then
finds it there and sends only the config and manifest.

Nothing unverified becomes a blob: the registry takes the upload under the oid's digest and
refuses it (no blob is made) unless the bytes hash to it, and serve checks the same bytes itself
before a commit may name them (:class:`.staging.Staging`). An upload the client abandons fails
its relay too: the registry's upload session is left unfinished, never a blob.
"""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ocibridge.core.pagecache import let_go
from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.reading.sources import RegistrySource, Source, repo_parts
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

    What it has read it lets go of from the page cache once it is on disk (issue 64,
    :mod:`ocibridge.core.pagecache`): the file is staged, read again only by a commit's header
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


class Relay:
    """One upload's relay: a thread pushing the blob ``sha256`` to ``store`` from ``follow``."""

    def __init__(self, store: WritableStore, sha256: str, size: int, path: Path) -> None:
        self.follow = Following(path, size)
        self.desc = Descriptor(mediaType="application/octet-stream", digest=f"sha256:{sha256}", size=size)
        self.store = store
        self.error: Exception | None = None
        self._opened = False
        self._thread = threading.Thread(target=self._run, name=f"relay-{sha256[:12]}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            write_blob(self.store, Blob(self.desc, self._reader))  # the one writer: unless the registry has it
        except Exception as e:  # noqa: BLE001 - the commit's push sends the blob itself then
            self.error = e
            log.info("relay of %s to %s: %s (the commit's push sends it)", self.desc.digest,
                     self.store.describe(), e)
        finally:
            self.follow.close()

    def _reader(self) -> BinaryIO:
        """The upload as it arrives, once: a relay cannot go back to its start (an upload the
        registry cut is then sent by the commit's push instead)."""
        if self._opened:
            raise OcibridgeError(f"relay of {self.desc.digest}: the upload cannot be read again")
        self._opened = True
        return io.BufferedReader(self.follow, 1 << 20)

    def wait(self) -> None:
        self._thread.join()


#: a relay of a large upload (the repository, the SHA-256, the size, the file being written), or
#: None where there is nowhere to relay to: :func:`relay_for` over the first source
RelayFor = Callable[[str, str, int, Path], "Relay | None"]


def relay_for(source: Source | None, repo_id: str, oid: str, size: int, tmp: Path) -> Relay | None:
    """A relay of a large upload (LFS or Xet) to the registry repository its commit will push to
    (``source``: the first source), when that is a registry."""
    store = registry_store(source, repo_id) if size >= RELAY_MIN else None
    return Relay(store, oid, size, tmp) if store is not None else None


def registry_store(source: Source | None, repo_id: str) -> WritableStore | None:
    """The registry repository a commit of ``repo_id`` will push to, when ``source`` (the first
    source) is a registry."""
    parts = repo_parts(repo_id)
    if parts is None or not isinstance(source, RegistrySource):
        return None
    repo = source.repository(parts)
    return repo.store if repo is not None and isinstance(repo.store, WritableStore) else None
