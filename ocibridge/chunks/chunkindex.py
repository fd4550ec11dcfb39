"""Which blob of the model cache holds which chunk: what a delta download reuses. The cache
(``cache/``) owns the directory and prunes it; the file format and its reading are here, with
the other chunk tables.

    $OCIBRIDGE_CACHE/models/chunks/tables/<blob hex>          SHA-256 chunk digests of a cached blob
    $OCIBRIDGE_CACHE/models/chunks/tables/blake3/<blob hex>   BLAKE3 ones (a table that names blake3)

When a blob whose chunk table is known lands in the cache, its entry is kept here
(:meth:`ChunkIndex.remember`): a header line, then one digest per chunk (65 bytes per MiB), in
the directory of the table's hash; a delta of a layer scans only its own hash's directory.
Nothing is kept in memory between runs: a delta asks for the chunks of one new layer, and the
files are scanned for those alone, newest first and at most ``MAX_TABLES`` of them, so memory
is bounded by the new layer's chunk count and a file whose blob is gone (pruned) is removed as
it is met. The index is never trusted: it says where to look, the reader hashes every chunk
(:mod:`ocibridge.chunks.delta`), and a place that read wrong is not offered again.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path

from ocibridge.chunks import hashes
from ocibridge.chunks.table import LayerChunks
from ocibridge.core.fsutil import atomic_write_bytes
from ocibridge.core.smallfile import read_small
from ocibridge.errors import OcibridgeError, TooLarge
from ocibridge.oci.digest import is_sha256_hex, split_digest

#: table files scanned for one delta, newest first (a model of 4 large files: 4 of them)
MAX_TABLES = 512
#: a table file over this is not read (a 1 TiB blob in 1 MiB chunks: 68 MiB)
MAX_TABLE_FILE = 80 * 1024 * 1024
#: places kept per chunk digest (a chunk in many blobs: the first few suffice)
MAX_PLACES = 3

_HEADER = re.compile(rb"ocibridge-chunks 1 (\d{1,9}) (\d{1,19})\n")


class ChunkIndex:
    """The ``chunks/tables`` directory of a model cache root."""

    def __init__(self, root: Path):
        self.root = root
        self.dir = root / "chunks" / "tables"  # SHA-256 tables' entries, where they were before BLAKE3
        self.blobs = root / "blobs" / "sha256"

    def dir_of(self, algorithm: str) -> Path:
        """The directory of the entries of tables that name ``algorithm``."""
        return self.dir if algorithm == hashes.SHA256 else self.dir / hashes.check_name(algorithm)

    def remember(self, entry: LayerChunks, chunk_size: int) -> None:
        """Keep the chunk digests of a blob now in the cache (verified by its digest); a
        cache that cannot write loses only a later delta."""
        algorithm, hexpart = split_digest(entry.digest)
        if algorithm != "sha256":
            return
        path = self.dir_of(entry.algorithm) / hexpart
        with contextlib.suppress(OSError):
            if path.is_file():
                os.utime(path)  # used again: scanned early
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            body = f"ocibridge-chunks 1 {chunk_size} {entry.size}\n" + "".join(c + "\n" for c in entry.chunks)
            atomic_write_bytes(path, body.encode(), 0o444)

    def for_layer(self, entry: LayerChunks) -> IndexedChunks:
        """Where the chunks of ``entry`` may be read locally: the layer's own blob too, when
        the cache holds it whole (a pull into a directory, whose output is not the cache, then
        reads every chunk here: docs/lazy.md). A blob the cache is writing now is not there
        yet (it lands whole, renamed), so nothing is read from what is being written."""
        wanted = set(entry.chunks)
        places: dict[str, list[tuple[str, int]]] = {}
        folder = self.dir_of(entry.algorithm)
        for blob_hex in self._newest_first(folder):
            table = self._read(folder, blob_hex)
            if table is None:
                continue
            chunk_size, chunks = table
            for i, chunk in enumerate(chunks):
                if chunk in wanted:
                    found = places.setdefault(chunk, [])
                    if len(found) < MAX_PLACES:
                        found.append((blob_hex, i * chunk_size))
        return IndexedChunks(self.blobs, places)

    def _newest_first(self, folder: Path) -> list[str]:
        try:
            entries = [e for e in os.scandir(folder) if is_sha256_hex(e.name)]
        except OSError:
            return []
        entries.sort(key=_mtime, reverse=True)
        return [e.name for e in entries[:MAX_TABLES]]

    def _read(self, folder: Path, blob_hex: str) -> tuple[int, list[str]] | None:
        """A table file, or None (removed when its blob is gone or it is malformed)."""
        path = folder / blob_hex
        try:  # the cache is shared: a FIFO (open would wait) or a link to /dev/zero (no end) in
            # place of a table is refused and removed, never read; a regular file only up to the cap
            blob_size = (self.blobs / blob_hex).stat().st_size
            data = read_small(path, MAX_TABLE_FILE, "chunk table", follow=False)
        except FileNotFoundError:
            self._forget(path)
            return None
        except TooLarge:
            return None
        except (OcibridgeError, OSError):
            self._forget(path)
            return None
        head = _HEADER.match(data)
        lines = data[head.end():].decode("ascii", "replace").split() if head else []
        if head is None or int(head.group(2)) != blob_size or not int(head.group(1)) \
                or len(lines) != -(-blob_size // int(head.group(1))):
            self._forget(path)
            return None
        return int(head.group(1)), lines

    def remove_orphans(self) -> int:
        """Remove every table file whose blob is no longer cached (``cache prune``): a delta
        removes one only as it meets it among the newest, so without this the files of pruned
        blobs would stay and count against ``--max-size``. Returns how many went."""
        entries = []
        for folder in {self.dir_of(name) for name in hashes.KNOWN}:
            with contextlib.suppress(OSError):
                entries += [e for e in os.scandir(folder) if is_sha256_hex(e.name)]
        removed = 0
        for entry in entries:
            if not (self.blobs / entry.name).is_file():
                self._forget(Path(entry.path))
                removed += 1
        return removed

    @staticmethod
    def _forget(path: Path) -> None:
        with contextlib.suppress(OSError):
            os.unlink(path)


class IndexedChunks:
    """The places found for one layer's chunks (a :class:`ocibridge.chunks.delta.LocalChunks`),
    read from the blobs by offset; close when done."""

    def __init__(self, blobs: Path, places: dict[str, list[tuple[str, int]]]):
        self._blobs = blobs
        self._places = places
        self._fds: dict[str, int | None] = {}

    def has(self, hexdigest: str) -> bool:
        return bool(self._places.get(hexdigest))

    def read(self, hexdigest: str, size: int) -> bytes | None:
        for blob_hex, offset in self._places.get(hexdigest, []):
            fd = self._fd(blob_hex)
            if fd is not None:
                with contextlib.suppress(OSError):
                    return os.pread(fd, size, offset)
        return None

    def damaged(self, hexdigest: str) -> None:
        """The first place offered read wrong: the next read tries the others."""
        found = self._places.get(hexdigest)
        if found:
            found.pop(0)

    def _fd(self, blob_hex: str) -> int | None:
        if blob_hex not in self._fds:
            try:  # never a FIFO's wait: opened without blocking, kept only if a regular file
                fd = os.open(self._blobs / blob_hex, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
            except OSError:
                self._fds[blob_hex] = None
            else:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    self._fds[blob_hex] = fd
                else:
                    os.close(fd)
                    self._fds[blob_hex] = None
        return self._fds[blob_hex]

    def close(self) -> None:
        for fd in self._fds.values():
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fds.clear()


def _mtime(entry: os.DirEntry[str]) -> float:
    try:
        return entry.stat().st_mtime
    except OSError:
        return 0.0
