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

import struct
from collections.abc import Iterable, Sequence

import blake3

DATA_KEY = bytes([102, 151, 245, 119, 91, 149, 80, 222, 49, 53, 203, 172, 165, 151, 24, 28, 157, 228, 33, 16,
                  155, 235, 43, 88, 180, 208, 176, 75, 147, 173, 242, 41])
NODE_KEY = bytes([1, 126, 197, 199, 165, 71, 41, 150, 253, 148, 102, 102, 180, 138, 2, 230, 93, 221, 83, 111,
                  55, 199, 109, 210, 248, 99, 82, 230, 74, 83, 113, 63])
ZERO_KEY = bytes(32)
#: the tree's mean branching factor
BRANCHING = 4
EMPTY = bytes(32)


_WORDS = struct.Struct("<4Q")
_TEXT = "{:016x}{:016x}{:016x}{:016x}".format


def hex_of(h: bytes) -> str:
    """The text of a hash, as xet-core prints it: four 64-bit little-endian words. One unpack and
    one format (half the time of reversing slices in a generator): the tree's every node
    is written this way, ~50,000 a GiB published."""
    return _TEXT(*_WORDS.unpack(h))


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


def _closes(node: tuple[bytes, int]) -> bool:
    """Whether a group ends after ``node`` (its hash is 0 modulo the branching factor)."""
    return int.from_bytes(node[0][24:32], "little") % BRANCHING == 0


def _merged(group: Sequence[tuple[bytes, int]]) -> tuple[bytes, int]:
    text = "".join(f"{hex_of(h)} : {size}\n" for h, size in group)
    return blake3.blake3(text.encode(), key=NODE_KEY).digest(), sum(size for _, size in group)


class Tree:
    """The tree's root over ``(hash, size)`` pairs given in order, a xorb's chunks at a time.

    Why: a file's hash is the tree over all its chunks (65 536 of them in 4 GiB); built level by
    level, every level is held at once. A group's end is known from its first nodes alone (a
    node at index 2 to 8 of it that closes it, else 9 nodes), except for the last group of a
    level, which takes what is left (at most 8 nodes): so each level holds only its open group,
    and a node is handed up as soon as its group closes. The groups, and so the hash, are the
    ones the level-by-level build makes (tests/serve/test_serve_xet_memory.py holds one to compare).
    """

    def __init__(self) -> None:
        self._open: list[list[tuple[bytes, int]]] = []  # per level, its group not closed yet
        self._seen: list[int] = []  # per level, the nodes it was given

    def add(self, chunk: bytes, size: int) -> None:
        self._push(0, (chunk, size))

    def extend(self, chunks: Iterable[tuple[bytes, int]]) -> None:
        for chunk, size in chunks:
            self._push(0, (chunk, size))

    def _push(self, depth: int, node: tuple[bytes, int]) -> None:
        if depth == len(self._open):
            self._open.append([])
            self._seen.append(0)
        group = self._open[depth]
        group.append(node)
        self._seen[depth] += 1
        if len(group) == 2 * BRANCHING + 1 or (len(group) >= 3 and _closes(node)):
            self._open[depth] = []
            self._push(depth + 1, _merged(group))

    def root(self) -> bytes:
        """The root over every pair given (all zero for none); the tree is spent after it."""
        depth = 0
        while depth < len(self._open):
            group = self._open[depth]
            if self._seen[depth] == 1:  # one node at a level: nothing was handed up, it is the root
                return group[0][0]
            if group:
                self._open[depth] = []
                self._push(depth + 1, _merged(group))
            depth += 1
        return EMPTY

    def file_hash(self) -> bytes:
        """The Xet hash of a file of the chunks given (all zero for none); spent after it."""
        return blake3.blake3(self.root(), key=ZERO_KEY).digest() if self._seen else EMPTY


def xorb_hash(chunks: Iterable[tuple[bytes, int]]) -> bytes:
    """The root of the tree over ``(chunk hash, chunk size)`` (all zero for no chunk)."""
    tree = Tree()
    tree.extend(chunks)
    return tree.root()


def file_hash(chunks: Iterable[tuple[bytes, int]]) -> bytes:
    """A file's Xet hash from its chunks in order (all zero for an empty file)."""
    tree = Tree()
    tree.extend(chunks)
    return tree.file_hash()
