"""Fetching a pull's layer under its chunk table's content key, each chunk checked as it lands
(the pull cache's :class:`ocibridge.transfer.tabledpull.TabledLayer`; why the key and not the
layer digest: that module's docstring)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ocibridge.chunks.chunktable import LayerChunks
from ocibridge.chunks.tablehash import TableHasher
from ocibridge.errors import DigestMismatch
from ocibridge.oci.digest import CHUNK
from ocibridge.oci.models import Descriptor
from ocibridge.stores.ranged import ByteCount, RangedStore
from ocibridge.transfer.tabledpull import LAYER_FILE, TABLED


@dataclass(frozen=True)
class TableCheckedLayer:
    """``desc`` as the bound table's ``entry`` describes it, in chunks of ``chunk_size``."""

    desc: Descriptor
    entry: LayerChunks
    chunk_size: int

    def fetch(self, cache_root: Path, source: RangedStore, on_bytes: ByteCount | None = None) -> Path:
        return fetch_by_table(cache_root, self.desc, self.entry, self.chunk_size, source, on_bytes)


def tabled_path(cache_root: Path, entry: LayerChunks, chunk_size: int) -> Path:
    """Where the layer these chunks make up is kept in the pull cache at ``cache_root``."""
    return cache_root / TABLED / entry.content_key(chunk_size) / LAYER_FILE


def fetch_by_table(cache_root: Path, desc: Descriptor, entry: LayerChunks, chunk_size: int,
                   source: RangedStore, on_bytes: ByteCount | None = None) -> Path:
    """``desc`` in the pull cache under its table's content key, each chunk checked as it
    lands (resumed from a partial file an interrupted run left there); a file a run before
    finished is checked again by the table before it is used. A wrong chunk: DigestMismatch,
    naming it, and nothing kept."""
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


def _matches(path: Path, entry: LayerChunks, chunk_size: int) -> bool:
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
