"""The hashes of the Xet protocol (specification 1.1, xet-core's ``merklehash``): what serve
recomputes of every uploaded xorb and file before it keeps anything.

- a chunk's hash: BLAKE3 keyed with :data:`DATA_KEY` over its (uncompressed) bytes;
- an inner node's hash: BLAKE3 keyed with :data:`NODE_KEY` over ``"{hex} : {size}\\n"`` per child;
- the tree: children grouped (at least 2, at most 9; a group ends after a child whose hash is 0
  modulo 4) and the groups hashed, level by level, until one is left: a xorb's hash;
- a file's hash: the root of its chunks' tree, hashed again keyed with 32 zero bytes.

A hash is 32 bytes; its text is the four little-endian 64-bit words in hex (not the bytes in
order): :func:`hex_of` and :func:`from_hex`.
"""

from __future__ import annotations

from collections.abc import Sequence

import blake3

DATA_KEY = bytes([102, 151, 245, 119, 91, 149, 80, 222, 49, 53, 203, 172, 165, 151, 24, 28, 157, 228, 33, 16,
                  155, 235, 43, 88, 180, 208, 176, 75, 147, 173, 242, 41])
NODE_KEY = bytes([1, 126, 197, 199, 165, 71, 41, 150, 253, 148, 102, 102, 180, 138, 2, 230, 93, 221, 83, 111,
                  55, 199, 109, 210, 248, 99, 82, 230, 74, 83, 113, 63])
ZERO_KEY = bytes(32)
#: the tree's mean branching factor
BRANCHING = 4
EMPTY = bytes(32)


def hex_of(h: bytes) -> str:
    """The text of a hash, as xet-core prints it."""
    return "".join(h[i:i + 8][::-1].hex() for i in range(0, 32, 8))


def from_hex(text: str) -> bytes | None:
    """The hash a text names (:func:`hex_of`'s inverse); None when it is not 64 hex digits."""
    if len(text) != 64:
        return None
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        return None
    return b"".join(raw[i:i + 8][::-1] for i in range(0, 32, 8))


def chunk_hash(data: bytes | memoryview) -> bytes:
    return blake3.blake3(data, key=DATA_KEY).digest()


def _cut(level: Sequence[tuple[bytes, int]], at: int) -> int:
    """Where the group of ``level`` starting at ``at`` ends."""
    left = len(level) - at
    if left <= 2:
        return len(level)
    end = at + min(2 * BRANCHING + 1, left)
    for i in range(at + 2, end):
        if int.from_bytes(level[i][0][24:32], "little") % BRANCHING == 0:
            return i + 1
    return end


def _merged(group: Sequence[tuple[bytes, int]]) -> tuple[bytes, int]:
    text = "".join(f"{hex_of(h)} : {size}\n" for h, size in group)
    return blake3.blake3(text.encode(), key=NODE_KEY).digest(), sum(size for _, size in group)


def xorb_hash(chunks: Sequence[tuple[bytes, int]]) -> bytes:
    """The root of the tree over ``(chunk hash, chunk size)`` (all zero for no chunk)."""
    if not chunks:
        return EMPTY
    level = list(chunks)
    while len(level) > 1:
        nxt: list[tuple[bytes, int]] = []
        at = 0
        while at < len(level):
            cut = _cut(level, at)
            nxt.append(_merged(level[at:cut]))
            at = cut
        level = nxt
    return level[0][0]


def file_hash(chunks: Sequence[tuple[bytes, int]]) -> bytes:
    """A file's Xet hash from its chunks in order (all zero for an empty file)."""
    if not chunks:
        return EMPTY
    return blake3.blake3(xorb_hash(chunks), key=ZERO_KEY).digest()
