"""Chunk digests of pushed raw files, by layer digest, so a re-push of an unchanged model (whose
digests the digest cache knows, so no file is read) binds its table without reading them either.

An entry is written only from a read that hashed the same bytes to that digest, so it is a fact
about the content, whatever file or source names it later. It lives beside the digest cache
(``$OCIBRIDGE_CACHE/chunk-tables/<chunkSize>/<hex>`` for SHA-256 chunk digests, as before tables
named BLAKE3; ``chunk-tables/blake3/<chunkSize>/<hex>`` for BLAKE3 ones: one hex digest a line,
the hash in the path, so a lookup never hands one hash's digests to a table of the other) and obeys its switch
(``OCIBRIDGE_DIGEST_CACHE=0``); an entry that does not parse is ignored and written again.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from ocibridge.chunks import hashes
from ocibridge.chunks.chunktable import LayerChunks, chunk_count
from ocibridge.core.environment import DIGEST_CACHE, cache_root, switched_on
from ocibridge.core.smallfile import read_small
from ocibridge.errors import OcibridgeError
from ocibridge.oci.digest import is_digest


def _named(digest: str) -> bool:
    return digest.startswith("sha256:") and is_digest(digest)


def _path(digest: str, chunk_size: int, algorithm: str) -> Path:
    top = cache_root() / "chunk-tables"
    if algorithm != hashes.SHA256:
        top = top / hashes.check_name(algorithm)
    return top / str(chunk_size) / digest.removeprefix("sha256:")


def lookup(digest: str, size: int, chunk_size: int, algorithm: str) -> LayerChunks | None:
    if not switched_on(DIGEST_CACHE) or not _named(digest):
        return None
    count = chunk_count(size, chunk_size)
    try:  # a FIFO or a link to /dev/zero in the cache is refused, never waited on or read without end
        data = read_small(_path(digest, chunk_size, algorithm), 65 * count + 64, "chunk table", follow=False)
        lines = data.decode("ascii").split()
    except (OSError, UnicodeDecodeError, OcibridgeError):
        return None
    if len(lines) != chunk_count(size, chunk_size) or not all(map(hashes.is_chunk_digest, lines)):
        return None
    return LayerChunks(digest, size, tuple(lines), algorithm)


def remember(entry: LayerChunks, chunk_size: int) -> None:
    """Written whole (a temporary file renamed into place); a cache that cannot be written is not used."""
    if not switched_on(DIGEST_CACHE) or not _named(entry.digest):
        return
    path = _path(entry.digest, chunk_size, entry.algorithm)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "w") as out:
                out.write("".join(c + "\n" for c in entry.chunks))
            os.replace(tmp, path)
        except OSError:
            os.unlink(tmp)
            raise
