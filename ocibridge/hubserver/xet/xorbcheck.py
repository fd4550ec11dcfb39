"""A xorb checked as it is received (issue 64): each chunk's header read, its bytes decompressed
and BLAKE3-hashed as the body arrives, so a xorb is never read back from disk to be checked
(that read and its parse were ~0.5 s of serve's CPU per GiB published over Xet).

The rules are those of :func:`.shards.chunks` and :func:`.shards.footer_hash`, held across the
pieces of a body: the bytes of a chunk not complete yet wait in one buffer that the next pieces
are appended to (a chunk is stored in at most twice :data:`.shards.MAX_CHUNK` bytes, so the
buffer stays the size of what is fed at once), and a footer, when one comes, ends the chunks.
What the xorb is (its name) is decided at the end, from the hashes made here.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from ocibridge.hubserver.xet import merkle, shards
from ocibridge.hubserver.xet.chunklist import ChunkList
from ocibridge.hubserver.xet.shards import FOOTER_IDENT, HEADER, MAX_CHUNK, MAX_XORB_CHUNKS, BadUpload

#: bytes of a footer read: its tag and version (8), a byte, then the xorb hash it names (32)
FOOTER_NAMES = HEADER + 1 + 32


class XorbCheck:
    """The chunks of one xorb body, fed in order (:meth:`feed`), then :meth:`result`."""

    def __init__(self) -> None:
        self._held = bytearray()  # bytes fed and not checked yet: the start of a chunk
        self._hashes = bytearray()
        self._sizes = array("I")
        self._footer: bytearray | None = None  # once the footer began: its first bytes
        self.problem: str | None = None

    def feed(self, pieces: Iterable[bytes]) -> None:
        """Check the chunks ``pieces`` complete (after a problem, nothing more is looked at)."""
        if self.problem is not None:
            return
        if self._footer is not None:
            for piece in pieces:
                self._footer += piece[:max(0, FOOTER_NAMES - len(self._footer))]
            return
        for piece in pieces:
            self._held += piece
        try:
            done = self._check(self._held)
        except BadUpload as e:
            self.problem = str(e)
            self._held = bytearray()
            return
        del self._held[:done]  # no view of it is left: _check's have ended with it

    def _check(self, held: bytearray) -> int:
        """Check every whole chunk at the start of ``held``; the bytes checked (all of them once
        the footer begins: its first bytes are kept for :meth:`result`)."""
        view = memoryview(held)
        at, n = 0, len(held)
        while n - at >= HEADER:
            if held[at:at + len(FOOTER_IDENT)] == FOOTER_IDENT:
                self._footer = bytearray(held[at:at + FOOTER_NAMES])
                return n
            version, stored, scheme, length = (held[at], int.from_bytes(held[at + 1:at + 4], "little"),
                                               held[at + 4], int.from_bytes(held[at + 5:at + 8], "little"))
            k = len(self._sizes)
            if version != 0 or length > MAX_CHUNK or stored > 2 * MAX_CHUNK or length == 0:
                raise BadUpload(f"chunk {k}: not a chunk header (version {version}, {stored} bytes for {length})")
            if k >= MAX_XORB_CHUNKS:
                raise BadUpload(f"the xorb holds more than {MAX_XORB_CHUNKS} chunks")
            if n - at < HEADER + stored:
                break
            body = view[at + HEADER:at + HEADER + stored]
            if scheme == 0:
                if stored != length:
                    raise BadUpload(f"a chunk is {stored} bytes, its header says {length}")
                self._hashes += merkle.chunk_hash(body)
            else:
                self._hashes += merkle.chunk_hash(shards.decompress(scheme, bytes(body), length))
            self._sizes.append(length)
            at += HEADER + stored
        return at

    def result(self, want: bytes) -> tuple[str | None, ChunkList]:
        """Why the body fed is not the xorb ``want`` (None: it is), and its chunks."""
        if self.problem is None and self._held[:len(FOOTER_IDENT)] == FOOTER_IDENT:
            self._held = bytearray()  # a footer cut short names nothing
        if self.problem is None and self._held:
            self.problem = ("the xorb ends inside a chunk header" if len(self._held) < HEADER
                            else f"chunk {len(self._sizes)} runs past the end of the xorb")
        if self.problem is not None:
            return self.problem, ChunkList()
        if not self._sizes:
            return "the xorb holds no chunk", ChunkList()
        chunks = ChunkList(bytes(self._hashes), self._sizes)
        if merkle.xorb_hash(chunks) != want:
            return "its chunks do not hash to the name it was sent under", ChunkList()
        footer = self._footer
        if footer is not None and len(footer) == FOOTER_NAMES and footer[HEADER + 1:] != want:
            return "its footer names another xorb", ChunkList()
        return None, chunks
