"""Chunk digests of pushed raw files, by layer digest, so a re-push of an unchanged model (whose
digests the digest cache knows, so no file is read) binds its table without reading them either.

An entry is written only from a read that hashed the same bytes to that digest, so it is a fact
about the content, whatever file or source names it later. It lives beside the digest cache
(``$OCIBRIDGE_CACHE/chunk-tables/<chunkSize>/<hex>``, one hex digest a line) and obeys its switch
(``OCIBRIDGE_DIGEST_CACHE=0``); an entry that does not parse is ignored and written again.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from ocibridge.chunks.table import LayerChunks, chunk_count
from ocibridge.core.environment import DIGEST_CACHE, cache_root, switched_on
from ocibridge.core.smallfile import read_small
from ocibridge.errors import OcibridgeError
from ocibridge.oci.digest import is_digest, is_sha256_hex


def _named(digest: str) -> bool:
    return digest.startswith("sha256:") and is_digest(digest)


def _path(digest: str, chunk_size: int) -> Path:
    return cache_root() / "chunk-tables" / str(chunk_size) / digest.removeprefix("sha256:")


def lookup(digest: str, size: int, chunk_size: int) -> LayerChunks | None:
    if not switched_on(DIGEST_CACHE) or not _named(digest):
        return None
    count = chunk_count(size, chunk_size)
    try:  # a FIFO or a link to /dev/zero in the cache is refused, never waited on or read without end
        data = read_small(_path(digest, chunk_size), 65 * count + 64, "chunk table", follow=False)
        lines = data.decode("ascii").split()
    except (OSError, UnicodeDecodeError, OcibridgeError):
        return None
    if len(lines) != chunk_count(size, chunk_size) or not all(map(is_sha256_hex, lines)):
        return None
    return LayerChunks(digest, size, tuple(lines))


def remember(entry: LayerChunks, chunk_size: int) -> None:
    """Written whole (a temporary file renamed into place); a cache that cannot be written is not used."""
    if not switched_on(DIGEST_CACHE) or not _named(entry.digest):
        return
    path = _path(entry.digest, chunk_size)
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
