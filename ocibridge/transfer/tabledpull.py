"""A pull's layer checked by the chunk table its manifest binds, as it lands.

A model pushed with a table (push's default from 64 MiB) names it in the manifest, whose
digest binds both the layer digest and every chunk digest. Checking each chunk as the
download's in-order hash reaches it (``chunks.tablehash``) proves the layer as well as its
SHA-256 would, with each byte hashed once, by the table's hash (BLAKE3: about three times
SHA-256's speed where the CPU has no SHA instructions), and no whole-blob SHA-256 after it.

What is proven is the table's word, and a table from an untrusted manifest can claim any
layer digest: the file is kept under the table's content key
(``LayerChunks.content_key``, a directory of its own in the pull cache: ``tabled/<key>/``),
never under the layer digest that other manifests' pulls trust (``blobs/sha256/``). An
interrupted download resumes there on the next run of the same table.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ocibridge.errors import DigestMismatch
from ocibridge.oci.digest import CHUNK
from ocibridge.oci.models import Descriptor
from ocibridge.stores.ranged import ByteCount, RangedStore

if TYPE_CHECKING:  # the chunk modules load when a tabled layer is fetched
    from ocibridge.chunks.table import LayerChunks
    from ocibridge.chunks.tablehash import TableHasher

#: the pull cache's directory of table-checked layers, one directory per content key
TABLED = "tabled"
#: the layer file's name inside its key's directory
LAYER_FILE = "layer"


@runtime_checkable
class LayerTables(Protocol):
    """Knows the chunk table a pull's manifest binds (read from ``source`` when first asked)."""

    def checked_by_table(self, desc: Descriptor, source: RangedStore) -> tuple[LayerChunks, int] | None:
        """The entry of ``desc`` and the table's chunk size, when the bound table covers it
        with a hash other than SHA-256 (a SHA-256 table saves nothing on the blob's own
        digest); None: the layer is checked by its SHA-256."""
        ...


def tabled_path(cache_root: Path, entry: LayerChunks, chunk_size: int) -> Path:
    """Where the layer these chunks make up is kept in the pull cache at ``cache_root``."""
    return cache_root / TABLED / entry.content_key(chunk_size) / LAYER_FILE


def fetch_by_table(cache_root: Path, desc: Descriptor, entry: LayerChunks, chunk_size: int,
                   source: RangedStore, on_bytes: ByteCount | None = None) -> Path:
    """``desc`` in the pull cache under its table's content key, each chunk checked as it
    lands (resumed from a partial file an interrupted run left there); a file a run before
    finished is checked again by the table before it is used. A wrong chunk: DigestMismatch,
    naming it, and nothing kept."""
    from ocibridge.chunks.tablehash import TableHasher
    from ocibridge.stores.partial import download

    final = tabled_path(cache_root, entry, chunk_size)
    if final.is_file() and not _matches(final, entry, chunk_size):
        final.unlink()  # changed since it was checked: fetched again
    hashers: list[TableHasher] = []

    def new_hasher() -> TableHasher:
        hashers.append(TableHasher(entry, chunk_size))
        return hashers[-1]

    try:
        download(final, desc, source, on_bytes=on_bytes, hasher_for=new_hasher)
    except DigestMismatch:
        raise DigestMismatch(_wrong_chunk(desc, hashers, chunk_size)) from None
    return final


def sweep(cache_root: Path) -> None:
    """Before a pull's first tabled fetch: the partial files killed runs left, once old enough
    (as the layout sweeps its own, ``core.stale``), and the key directories they leave empty."""
    from ocibridge.core.stale import GRACE_SECONDS, remove_stale
    from ocibridge.stores.partial import PARTIAL_PREFIX

    try:
        keys = [entry for entry in (cache_root / TABLED).iterdir() if entry.is_dir() and not entry.is_symlink()]
    except FileNotFoundError:
        return
    now = time.time()
    for key in keys:
        remove_stale(key, PARTIAL_PREFIX)
        with contextlib.suppress(OSError):
            if now - key.stat().st_mtime > GRACE_SECONDS:  # not one another pull just made
                key.rmdir()  # only when empty


def forget(path: Path) -> None:
    """Drop a tabled layer from the pull cache (the pull that used it succeeded). Its key's
    directory stays (another pull of the same table may be downloading into it), for
    :func:`sweep` to remove once empty and old."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _matches(path: Path, entry: LayerChunks, chunk_size: int) -> bool:
    from ocibridge.chunks.tablehash import TableHasher

    hasher = TableHasher(entry, chunk_size)
    with open(path, "rb") as f:
        while piece := f.read(CHUNK):
            hasher.update(piece)
    return bool(hasher.hexdigest())


def _wrong_chunk(desc: Descriptor, hashers: list[TableHasher], chunk_size: int) -> str:
    failed = next((h.failed_chunk for h in reversed(hashers) if h.failed_chunk is not None), None)
    if failed is None:
        return f"{desc.digest}: the layer does not match the chunk table its manifest binds"
    start = failed * chunk_size
    end = min(start + chunk_size, desc.size)
    return (f"{desc.digest}: chunk {failed} (bytes {start}-{end - 1}) does not match the chunk table "
            "its manifest binds: the registry sent other bytes")
