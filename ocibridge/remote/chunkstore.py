"""Where verified chunks outlive one open file: a store keyed by the chunk's SHA-256.

A protocol only: the model cache (``ocibridge.cache.chunks``, a layer above) implements it and
``api.lazy_ops`` wires it in, so this layer never imports the cache. A reader hands the store a
chunk only after checking it against the chunk table, and checks what the store gives back the
same way before using it: a store that lost or damaged a chunk costs a fetch, never a wrong
byte.
"""

from __future__ import annotations

from typing import Protocol


class ChunkStore(Protocol):
    def has(self, sha256_hex: str) -> bool:
        """Whether the chunk is there (cheap: decides whether to ask the registry)."""
        ...

    def get(self, sha256_hex: str) -> bytes | None:
        """The chunk's bytes, or None if gone (the caller verifies them)."""
        ...

    def put(self, sha256_hex: str, data: bytes | bytearray) -> None:
        """Keep ``data``, already verified to have this digest; errors are the store's to
        swallow (a cache that cannot write must not fail a read)."""
        ...

    def drop(self, sha256_hex: str) -> None:
        """Forget a chunk whose stored bytes did not match its digest."""
        ...
