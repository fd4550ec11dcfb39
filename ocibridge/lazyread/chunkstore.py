"""Where verified chunks outlive one open file: a store keyed by the chunk's digest named with
its hash (``LayerChunks.chunk_id``: ``blake3:<hex>``, ``sha256:<hex>``), and whole layers kept as
one file each.

A protocol only: the model cache (``ocibridge.cache.chunks``) implements it and
``api.lazy_ops`` wires it in, so this package never imports the cache. A reader hands the store a
chunk only after checking it against the chunk table, and checks what the store gives back the
same way before using it: a store that lost or damaged a chunk costs a fetch, never a wrong
byte.

Two shapes, because they cost differently: chunks read here and there are kept one file per
chunk (shared between layers and models), while a layer read from its first byte on is kept as
one file (writing 1,024 small files cost more than the whole read of a GiB: docs/lazy.md);
``lazyread.keeper`` decides which.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from ocibridge.chunks.chunktable import LayerChunks
    from ocibridge.chunks.delta import LocalChunks


class StoredLayer(Protocol):
    """Every chunk of one layer, at its offset, in one piece of storage (read-only)."""

    def read_at(self, offset: int, size: int) -> bytes | None:
        """``size`` bytes from ``offset``, or None if they cannot be read (the caller verifies)."""
        ...

    def size(self) -> int:
        """Bytes held, from the layer's first: a layer file may hold a prefix of its chunks."""
        ...

    def close(self) -> None: ...


class LayerStaging(Protocol):
    """A layer file being filled, chunk by verified chunk, in any order; ``commit`` makes it a
    :class:`StoredLayer` (whole, or cut by ``truncate`` to the chunks from the first up to the
    first gap), ``discard`` throws it away. A commit never replaces a longer file."""

    def write_at(self, offset: int, data: bytes | bytearray) -> None: ...

    def read_at(self, offset: int, size: int) -> bytes: ...

    def truncate(self, size: int) -> None: ...

    def commit(self) -> None: ...

    def discard(self) -> None: ...


class ChunkStore(Protocol):
    """Chunks by ``chunk_id`` (``<hash>:<hex>``): the hash is part of the name, so a chunk kept
    for a table of one hash is never offered under a digest of the other."""

    def has(self, chunk_id: str) -> bool:
        """Whether the chunk is there (cheap: decides whether to ask the registry)."""
        ...

    def get(self, chunk_id: str) -> bytes | None:
        """The chunk's bytes, or None if gone (the caller verifies them)."""
        ...

    def put(self, chunk_id: str, data: bytes | bytearray) -> None:
        """Keep ``data``, already verified to have this digest; errors are the store's to
        swallow (a cache that cannot write must not fail a read)."""
        ...

    def drop(self, chunk_id: str) -> None:
        """Forget a chunk whose stored bytes did not match its digest."""
        ...

    def open_layer(self, key: str) -> StoredLayer | None:
        """The layer file named ``key`` (``LayerChunks.content_key``), or None if not kept."""
        ...

    def stage_layer(self, key: str) -> LayerStaging | None:
        """A new layer file to fill, or None if the store cannot write one now."""
        ...

    def layer_target(self, key: str) -> Path | None:
        """Where a whole layer file named ``key`` goes when a download fills it in place
        (``lazyread.layerfill``), its directory made; None if the store cannot take one."""
        ...

    def open_blob(self, digest: str) -> StoredLayer | None:
        """A whole blob the store holds under its own digest, or None (a pull into the model
        cache leaves them; the reader checks what it reads, by chunk or by the whole digest)."""
        ...

    def drop_layer(self, key: str) -> None:
        """Forget a layer file one of whose chunks did not match its digest."""
        ...

    def elsewhere(self, chunks: LayerChunks) -> LocalChunks:
        """Where chunks of this layer may be held under other blobs (an earlier version's, in
        the model cache): what a delta download reuses, and a lazy read too."""
        ...
