"""Which blob of the model cache holds which chunk: what a delta download reuses. The cache
(``cache/``) owns the directory and prunes it; the file format and its reading are here, with
the other chunk tables.

    $OCIBRIDGE_CACHE/models/chunks/tables/<blob hex>          SHA-256 chunk digests of a cached blob
    $OCIBRIDGE_CACHE/models/chunks/tables/blake3/<blob hex>   BLAKE3 ones (a table that names blake3)
    $OCIBRIDGE_CACHE/models/chunks/tables/layers/<hash>/<key> those of a layer file ``path`` linked
                                                              (``chunks/layers/<key>``: cache/blobsource.py)

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
from ocibridge.chunks.chunktable import LayerChunks
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
        self.layers = root / "chunks" / "layers"  # whole layers kept under a table's content key

    def dir_of(self, algorithm: str) -> Path:
        """The directory of the entries of tables that name ``algorithm``."""
        return self.dir if algorithm == hashes.SHA256 else self.dir / hashes.check_name(algorithm)

    def _homes(self, algorithm: str) -> list[tuple[Path, Path]]:
        """(entries, where their bytes are) of ``algorithm``: cached blobs, then layer files."""
        return [(self.dir_of(algorithm), self.blobs),
                (self.dir / "layers" / hashes.check_name(algorithm), self.layers)]

    def remember_layer(self, entry: LayerChunks, chunk_size: int) -> None:
        """Keep the chunk digests of the layer file named by ``entry``'s content key, which a
        snapshot now links (hashed whole by ``path``): a later version's delta reads them there."""
        _write(self._homes(entry.algorithm)[1][0] / entry.content_key(chunk_size), entry, chunk_size)

    def remember(self, entry: LayerChunks, chunk_size: int) -> None:
        """Keep the chunk digests of a blob now in the cache (verified by its digest); a
        cache that cannot write loses only a later delta."""
        algorithm, hexpart = split_digest(entry.digest)
        if algorithm != "sha256":
            return
        _write(self.dir_of(entry.algorithm) / hexpart, entry, chunk_size)

    def for_layer(self, entry: LayerChunks) -> IndexedChunks:
        """Where the chunks of ``entry`` may be read locally: the layer's own blob too, when
        the cache holds it whole (a pull into a directory, whose output is not the cache, then
        reads every chunk here: docs/lazy.md). A blob the cache is writing now is not there
        yet (it lands whole, renamed), so nothing is read from what is being written."""
        wanted = set(entry.chunks)
        places: dict[str, list[tuple[Path, int]]] = {}
        for folder, home in self._homes(entry.algorithm):
            for blob_hex in self._newest_first(folder):
                table = self._read(folder, blob_hex, home)
                if table is None:
                    continue
                chunk_size, chunks = table
                for i, chunk in enumerate(chunks):
                    if chunk in wanted:
                        found = places.setdefault(chunk, [])
                        if len(found) < MAX_PLACES:
                            found.append((home / blob_hex, i * chunk_size))
        return IndexedChunks(places)

    def _newest_first(self, folder: Path) -> list[str]:
        try:
            entries = [e for e in os.scandir(folder) if is_sha256_hex(e.name)]
        except OSError:
            return []
        entries.sort(key=_mtime, reverse=True)
        return [e.name for e in entries[:MAX_TABLES]]

    def _read(self, folder: Path, blob_hex: str, home: Path) -> tuple[int, list[str]] | None:
        """A table file, or None (removed when its blob, in ``home``, is gone or it is malformed)."""
        path = folder / blob_hex
        try:  # the cache is shared: a FIFO (open would wait) or a link to /dev/zero (no end) in
            # place of a table is refused and removed, never read; a regular file only up to the cap
            blob_size = (home / blob_hex).stat().st_size
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
        for folder, home in {place for name in hashes.KNOWN for place in self._homes(name)}:
            with contextlib.suppress(OSError):
                entries += [(e, home) for e in os.scandir(folder) if is_sha256_hex(e.name)]
        removed = 0
        for entry, home in entries:
            if not (home / entry.name).is_file():
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

    def __init__(self, places: dict[str, list[tuple[Path, int]]]):
        self._places = places
        self._fds: dict[Path, int | None] = {}

    def has(self, hexdigest: str) -> bool:
        return bool(self._places.get(hexdigest))

    def read(self, hexdigest: str, size: int) -> bytes | None:
        for blob, offset in self._places.get(hexdigest, []):
            fd = self._fd(blob)
            if fd is not None:
                with contextlib.suppress(OSError):
                    return os.pread(fd, size, offset)
        return None

    def damaged(self, hexdigest: str) -> None:
        """The first place offered read wrong: the next read tries the others."""
        found = self._places.get(hexdigest)
        if found:
            found.pop(0)

    def _fd(self, blob: Path) -> int | None:
        if blob not in self._fds:
            try:  # never a FIFO's wait: opened without blocking, kept only if a regular file
                fd = os.open(blob, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
            except OSError:
                self._fds[blob] = None
            else:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    self._fds[blob] = fd
                else:
                    os.close(fd)
                    self._fds[blob] = None
        return self._fds[blob]

    def close(self) -> None:
        for fd in self._fds.values():
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fds.clear()


def _write(path: Path, entry: LayerChunks, chunk_size: int) -> None:
    """An entry's file (its mtime refreshed if there: used again, scanned early); a cache that
    cannot write loses only a later delta."""
    with contextlib.suppress(OSError):
        if path.is_file():
            os.utime(path)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        body = f"ocibridge-chunks 1 {chunk_size} {entry.size}\n" + "".join(c + "\n" for c in entry.chunks)
        atomic_write_bytes(path, body.encode(), 0o444)


def _mtime(entry: os.DirEntry[str]) -> float:
    try:
        return entry.stat().st_mtime
    except OSError:
        return 0.0
