"""The chunks of a xorb as serve keeps them between its upload and the shard: every
chunk's hash and length, held as one ``bytes`` of 32 bytes a hash and one ``array`` of lengths.

Why: serve holds a chunk list of every xorb of a file until the shard that names the file has
been checked (:mod:`.ahead`), and reads them back to record what the repository may dedupe
(:mod:`.dedupe`). As a list of ``(bytes, int)`` tuples a chunk cost ~160 bytes of Python objects,
so serve's memory grew by ~10 MB with each 4 GiB of file; packed, a chunk costs 36 bytes.

It is a read-only sequence of ``(hash, length)`` pairs, so the hash functions of :mod:`.merkle`
take it as they take a list of them.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

HASH = 32


class ChunkList(Sequence[tuple[bytes, int]]):
    """``(chunk hash, chunk length)`` of each chunk of a xorb, in order (the module's docstring)."""

    __slots__ = ("_hashes", "_sizes")

    def __init__(self, hashes: bytes = b"", sizes: array[int] | None = None) -> None:
        self._hashes = hashes
        self._sizes = sizes if sizes is not None else array("I")
        if len(self._hashes) != HASH * len(self._sizes):
            raise ValueError(f"{len(self._hashes)} bytes of hashes for {len(self._sizes)} chunks")

    @classmethod
    def of(cls, chunks: Iterable[tuple[bytes, int]]) -> ChunkList:
        """The pairs of ``chunks`` packed (each hash 32 bytes, each length under 4 GiB)."""
        hashes = bytearray()
        sizes = array("I")
        for chunk, size in chunks:
            if len(chunk) != HASH:
                raise ValueError(f"a chunk hash of {len(chunk)} bytes")
            hashes += chunk
            sizes.append(size)
        return cls(bytes(hashes), sizes)

    def __len__(self) -> int:
        return len(self._sizes)

    @overload
    def __getitem__(self, index: int) -> tuple[bytes, int]: ...

    @overload
    def __getitem__(self, index: slice) -> ChunkList: ...

    def __getitem__(self, index: int | slice) -> tuple[bytes, int] | ChunkList:
        if isinstance(index, slice):
            first, end, step = index.indices(len(self))
            if step != 1:
                raise ValueError("a chunk list is sliced in order, one chunk after another")
            end = max(first, end)
            return ChunkList(self._hashes[HASH * first:HASH * end], self._sizes[first:end])
        k = range(len(self))[index]  # an IndexError past the end, negative indexes as a list's
        return self._hashes[HASH * k:HASH * k + HASH], self._sizes[k]

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        hashes = self._hashes
        for k, size in enumerate(self._sizes):
            yield hashes[HASH * k:HASH * k + HASH], size

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChunkList):
            return NotImplemented
        return self._hashes == other._hashes and self._sizes == other._sizes

    __hash__ = None  # type: ignore[assignment]  # a value, compared by content, as a list is

    def __repr__(self) -> str:
        return f"ChunkList({len(self)} chunks, {self.total()} bytes)"

    def size(self, k: int) -> int:
        """The length of chunk ``k``."""
        return self._sizes[k]

    def lengths(self) -> Sequence[int]:
        """Every chunk's length, in order (the list's own: not to be changed)."""
        return self._sizes

    def total(self, first: int = 0, end: int | None = None) -> int:
        """The bytes of chunks ``[first, end)``."""
        return sum(self._sizes[first:end])
