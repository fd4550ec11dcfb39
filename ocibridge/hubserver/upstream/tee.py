"""One file of an upstream fetch, teed: the upstream's bytes are written to a partial file (its
:class:`TeeFile`) and, as they land, read by every client that asked for the file meanwhile
(single-flight per file: one upstream download, any number of readers). A reader gets every byte
but the last until the whole file hashed to what the upstream listed: a file that does not is cut
short (its body incomplete, so the client's own check fails too) and never reaches the registry.

The same pass makes the file's chunk table entry where the fetch's :class:`ChunkPolicy` wants one
(push's rule: a file of its threshold or more, BLAKE3 digests of each chunk), so the artifact binds
the table ``push`` would and no file is read again for it.

The partial file is kept when a fetch is cut: the next fetch of the file resumes from its length
(a ``Range`` request); one that fails its check is removed (fetched whole again)."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.chunks.chunktable import LayerChunks
from ocibridge.core.streams import CHUNK

if TYPE_CHECKING:
    from ocibridge.chunks.chunking import ChunkHasher, ChunkPolicy
    from ocibridge.hubserver.upstream.pickles import PickleSniff



class FileCut(Exception):
    """The file's fetch failed: what a reader of it meets (its connection is cut)."""


def hasher(kind: str, size: int) -> Any:
    """What checks a file: its SHA-256 (an LFS file), or git's blob id (whose header says its size)."""
    if kind == "sha256":
        return hashlib.sha256()
    h = hashlib.sha1(f"blob {size}\0".encode())  # noqa: S324 - git's name, not security
    return h


class FileHash:
    """A file's check (:func:`hasher`) and its content's SHA-256, made in the one pass over its
    bytes: the content's is the artifact's layer digest, so nothing hashes the file again (an LFS
    file's check is that SHA-256 itself; a git-blob file, small on the Hub, is hashed twice over).
    ``chunking``: the digests of its chunks too, where that policy wants the file's table."""

    def __init__(self, kind: str, size: int, chunking: ChunkPolicy | None = None):
        self.check = hasher(kind, size)
        self.content = self.check if kind == "sha256" else hashlib.sha256()
        self.chunks: ChunkHasher | None = None
        if chunking is not None and chunking.wants(size):
            from ocibridge.chunks.chunking import ChunkHasher

            self.chunks = ChunkHasher(chunking.chunk_size, threaded=False, algorithm=chunking.algorithm)

    def update(self, data: bytes | memoryview) -> None:
        self.check.update(data)
        if self.content is not self.check:
            self.content.update(data)
        if self.chunks is not None:
            self.chunks.update(data)  # hashed before this returns: a view of a reused buffer is fine

    def chunk_digests(self) -> tuple[str, ...] | None:
        """The chunk digests of the bytes fed (None: the file gets no table)."""
        return None if self.chunks is None else self.chunks.finish()


class FileFlight:
    """One file in flight: written once (by the fetch, through :meth:`opened`), read by many."""

    def __init__(self, path: str, size: int, kind: str, expected: str, partial: Path, final: Path,
                 chunking: ChunkPolicy | None = None, refuse_pickles: Callable[[str], Exception] | None = None,
                 scan: Callable[[str, Path], Exception | None] | None = None):
        self.path, self.size, self.kind, self.expected = path, size, kind, expected
        self.partial, self.final = partial, final
        self.chunking = chunking  # which files get a chunk table, in which chunks (None: none does)
        #: the refusal of a pickle-bearing file (why -> error, pickles.py); None: pickles let in
        self.refuse_pickles = refuse_pickles
        #: the content scan of the whole file (path, local file -> its refusal or None; scanned.py)
        self.scan = scan
        self._cond = threading.Condition()
        self.written = 0
        self.checked = False  # the whole file hashed to ``expected`` (and moved to ``final``)
        self.sha256: str | None = None  # once checked: its content's SHA-256 (hex), hashed as it was written
        self.chunks: LayerChunks | None = None  # once checked: its table entry, where ``chunking`` wants one
        self.error: str | None = None
        self.readers = 0  # reads of the file under way
        self.last_read = 0.0  # when the last of them ended (time.monotonic())

    # -- the writer ---------------------------------------------------------------------------
    def opened(self) -> TeeFile:
        """The partial file to append to, with what it already holds counted and hashed: a
        resumed fetch asks the upstream for the rest."""
        self.partial.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.partial, "a+b")  # noqa: SIM115 - TeeFile closes it
        tee = TeeFile(self, f)
        tee.rehash(f.seek(0, os.SEEK_END))
        return tee

    def adopt(self) -> bool:
        """Whether the snapshot holds the file already, checked (a fetch cut after it was whole)."""
        if not self.final.is_file():
            return False
        h = FileHash(self.kind, self.size, self.chunking)
        with open(self.final, "rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
        whole = h.check.hexdigest() == self.expected and self.final.stat().st_size == self.size
        refused = self._refused_whole(self.final) if whole else None
        with self._cond:
            self.checked = whole and refused is None
            if refused is not None:
                self.error = str(refused)
            if self.checked:
                self.written, self.sha256 = self.size, h.content.hexdigest()
                self.chunks = self._entry(self.sha256, h.chunk_digests())
            self._cond.notify_all()
        if not self.checked:
            self.final.unlink(missing_ok=True)
        if refused is not None:
            raise refused
        return self.checked

    def advanced(self, written: int) -> None:
        with self._cond:
            self.written = written
            self._cond.notify_all()

    def finish(self, digest: str, sha256: str | None = None, chunks: tuple[str, ...] | None = None) -> None:
        """The file's bytes are all in (``digest``: what they hash to by the file's check;
        ``sha256``: their content's, where the writer made it; an LFS file's is ``digest``;
        ``chunks``: their chunk digests by :attr:`chunking`, where the writer made them):
        checked, moved into the snapshot, readers let through; else removed and its readers cut."""
        refused = self._refused_whole(self.partial) if digest == self.expected and self.written == self.size else None
        with self._cond:
            if refused is not None:
                self.partial.unlink(missing_ok=True)
                self.error = str(refused)
            elif digest != self.expected or self.written != self.size:
                self.partial.unlink(missing_ok=True)
                self.error = (f"{self.path}: the upstream said {self.kind} {self.expected} ({self.size} bytes), "
                              f"the bytes it sent hash to {digest} ({self.written} bytes): refused")
            else:
                self.final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(self.partial, self.final)
                self.checked = True
                self.sha256 = sha256 if sha256 is not None else digest if self.kind == "sha256" else None
                self.chunks = self._entry(self.sha256, chunks)
            self._cond.notify_all()
        if refused is not None:
            raise refused
        if self.error is not None:
            raise FileCut(self.error)

    def _refused_whole(self, local: Path) -> Exception | None:
        """The refusal of the whole file at ``local``: its zip entries are a pickle's (pickles.py),
        or the content scan flags it (scanned.py)."""
        if self.refuse_pickles is not None:
            from ocibridge.hubserver.upstream.pickles import pickled_file

            why = pickled_file(local)
            if why is not None:
                return self.refuse_pickles(why)
        return None if self.scan is None else self.scan(self.path, local)

    def refuse(self, error: Exception) -> None:
        """The file refused as it arrives (its first bytes are a pickle's): removed, readers cut."""
        with self._cond:
            self.error = str(error)
            self.partial.unlink(missing_ok=True)
            self._cond.notify_all()

    def _entry(self, sha256: str | None, chunks: tuple[str, ...] | None) -> LayerChunks | None:
        """The checked file's table entry (None: its content's SHA-256 or its chunks not made, or
        chunks that do not cover its size: the build then reads it for them, as push would)."""
        if sha256 is None or chunks is None or self.chunking is None:
            return None
        from ocibridge.chunks.chunktable import chunk_count

        if len(chunks) != chunk_count(self.size, self.chunking.chunk_size):
            return None
        return LayerChunks(f"sha256:{sha256}", self.size, chunks, self.chunking.algorithm)

    def fail(self, why: str) -> None:
        """The fetch stopped before the file was whole (the partial file kept: resumed next time)."""
        with self._cond:
            if not self.checked and self.error is None:
                self.error = why
            self._cond.notify_all()

    # -- the readers --------------------------------------------------------------------------
    def read(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Bytes ``start``..``end`` as they land; the last byte of the file only once it checked.
        Raises :class:`FileCut` where the fetch failed (the caller's connection is cut)."""
        end = self.size if end is None else end
        with self._cond:
            f = self._open()
            self.readers += 1
        reading = True
        try:
            at = start
            for chunk in self._read_from(f, start, end):
                at += len(chunk)
                if at >= end:  # done with its last bytes: a server that never asks past them (Starlette,
                    reading = self._read_ended()  # once the client left) does not hold the push back
                yield chunk
        finally:
            if reading:
                self._read_ended()

    def _read_ended(self) -> bool:
        with self._cond:
            self.readers -= 1
            self.last_read = time.monotonic()
            self._cond.notify_all()
        return False

    def _read_from(self, f: Any, start: int, end: int) -> Iterator[bytes]:
        with f:
            at = start
            while at < end:
                with self._cond:
                    while True:
                        if self.error is not None:
                            raise FileCut(self.error)
                        ready = self.size if self.checked else min(self.written, self.size - 1)
                        if ready > at:
                            break
                        self._cond.wait(5)
                f.seek(at)
                chunk = f.read(min(CHUNK, ready - at, end - at))
                if not chunk:
                    raise FileCut(f"{self.path}: the partial file ended early")
                at += len(chunk)
                yield chunk

    def _open(self) -> Any:
        """The file being written (or, once checked, the snapshot's): held under the lock, which
        the move into the snapshot takes too."""
        for candidate in (self.final,) if self.checked else (self.partial, self.final):
            try:
                return open(candidate, "rb")  # noqa: SIM115 - read() closes it
            except FileNotFoundError:
                continue
        if self.error is not None:
            raise FileCut(self.error)
        self.partial.parent.mkdir(parents=True, exist_ok=True)
        self.partial.touch()
        return open(self.partial, "rb")  # noqa: SIM115 - read() closes it

    def unread_since(self) -> float | None:
        """Since when no one reads the file (``time.monotonic()``; 0: never read), None while
        someone does."""
        with self._cond:
            return None if self.readers else self.last_read

    def begun(self, timeout: float) -> str | None:
        """Waits up to ``timeout`` for the file's first bytes (or its end): why its fetch failed,
        where it failed before a reader's answer began (so it can say so before its headers)."""
        with self._cond:
            self._cond.wait_for(lambda: self.written > 0 or self.checked or self.error is not None, timeout)
            return None if self.checked else self.error

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the file checked (waiting for its end); False when it failed."""
        with self._cond:
            self._cond.wait_for(lambda: self.checked or self.error is not None, timeout)
            return self.checked


class TeeFile:
    """The fetch's partial file: each write lands in the partial file, is hashed and is told to
    the file's readers; a rewind (an upstream that ignored the Range) re-hashes what is kept."""

    def __init__(self, flight: FileFlight, f: Any):
        self.flight, self._f = flight, f
        self._hash = FileHash(flight.kind, flight.size, flight.chunking)
        self._sniff = self._sniffer()

    def _sniffer(self) -> PickleSniff | None:
        from ocibridge.hubserver.upstream.pickles import PickleSniff

        return None if self.flight.refuse_pickles is None else PickleSniff()

    def _sniffed(self, data: bytes | memoryview) -> None:
        """A pickle's first bytes refused before the rest is written (or read by anyone)."""
        if self._sniff is not None and (why := self._sniff.update(data)) is not None:
            assert self.flight.refuse_pickles is not None
            error = self.flight.refuse_pickles(why)
            self.flight.refuse(error)
            raise error

    def write(self, data: bytes | memoryview) -> int:
        self._sniffed(data)
        n = self._f.write(data)
        self._f.flush()
        self._hash.update(data)
        self.flight.advanced(self._f.tell())
        return int(n)

    def tell(self) -> int:
        return int(self._f.tell())

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return int(self._f.seek(offset, whence))

    def truncate(self, size: int | None = None) -> int:
        kept = int(self._f.truncate(size))
        self.rehash(kept)
        return kept

    def rehash(self, length: int) -> None:
        """The hash restarted over the partial file's first ``length`` bytes."""
        self._hash = FileHash(self.flight.kind, self.flight.size, self.flight.chunking)
        self._sniff = self._sniffer()
        self._f.seek(0)
        left = length
        while left > 0 and (chunk := self._f.read(min(CHUNK, left))):
            self._sniffed(chunk)
            self._hash.update(chunk)
            left -= len(chunk)
        self._f.seek(length)
        self.flight.advanced(length)

    def hexdigest(self) -> str:
        """What the bytes written hash to by the file's check."""
        return str(self._hash.check.hexdigest())

    def sha256(self) -> str:
        """The SHA-256 (hex) of the bytes written."""
        return str(self._hash.content.hexdigest())

    def chunks(self) -> tuple[str, ...] | None:
        """The chunk digests of the bytes written (None: the file gets no table)."""
        return self._hash.chunk_digests()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> TeeFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
