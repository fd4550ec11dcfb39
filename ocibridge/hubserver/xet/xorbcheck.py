"""A xorb checked as it is received: each chunk's header read, its bytes decompressed
and BLAKE3-hashed as the body arrives, so a xorb is never read back from disk to be checked
(that read and its parse were ~0.5 s of serve's CPU per GiB published over Xet).

The rules are those of :func:`.shards.chunks` (and a footer, when there is one, names the xorb
it ends: its tag, a version byte, then the hash), held across the pieces of a body. A chunk
that lies whole within a piece is hashed (or decompressed) from the piece itself, in one call;
only a chunk that a piece's end cuts is gathered (at most twice :data:`.shards.MAX_CHUNK`) and
hashed once whole, as is a header cut between two pieces (8 bytes). One BLAKE3 call a chunk
: hashed a part at a time, cut where the pieces end, a chunk cost BLAKE3 half as much
again (0.30 against 0.21 s a GiB of ~64 KiB chunks), its tree split at unaligned offsets. A
footer, when one comes, ends the chunks. What the xorb is (its name) is decided at the end,
from the hashes made here.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from ocibridge.hubserver.xet import merkle, shards
from ocibridge.hubserver.xet.chunklist import ChunkList
from ocibridge.hubserver.xet.shards import FOOTER_IDENT, HEADER, BadUpload

#: bytes of a footer read: its tag and version (8), a byte, then the xorb hash it names (32)
FOOTER_NAMES = HEADER + 1 + 32


class XorbCheck:
    """The chunks of one xorb body, fed in order (:meth:`feed`), then :meth:`result`."""

    def __init__(self) -> None:
        self._head = bytearray()  # a chunk header not whole yet
        self._left = 0  # bytes of the current chunk not fed yet (0: a header comes next)
        self._scheme = self._stored = self._length = 0
        self._parts = bytearray()  # a chunk cut by a piece's end: gathered until whole
        self._hashes = bytearray()
        self._sizes = array("I")
        self._footer: bytearray | None = None  # once the footer began: its first bytes
        self.problem: str | None = None

    def feed(self, pieces: Iterable[bytes]) -> None:
        """Check the chunks ``pieces`` complete (after a problem, nothing more is looked at)."""
        if self.problem is not None:
            return
        try:
            for piece in pieces:
                self._feed(memoryview(piece))
        except BadUpload as e:
            self.problem = str(e)

    def _feed(self, view: memoryview) -> None:
        at, n = 0, len(view)
        while at < n:
            if self._footer is not None:
                self._footer += view[at:at + max(0, FOOTER_NAMES - len(self._footer))]
                return
            if self._left == 0:
                take = min(HEADER - len(self._head), n - at)
                self._head += view[at:at + take]
                at += take
                if len(self._head) == HEADER:
                    self._start(bytes(self._head))
                    self._head.clear()
                continue
            take = min(self._left, n - at)
            if take == self._left and not self._parts:  # the chunk lies whole in this piece
                self._left = 0
                self._end(view[at:at + take])
            else:
                self._parts += view[at:at + take]
                self._left -= take
                if self._left == 0:
                    self._end(memoryview(self._parts))
            at += take

    def _start(self, head: bytes) -> None:
        """A chunk's header, checked; its bytes are what comes next."""
        if head[:len(FOOTER_IDENT)] == FOOTER_IDENT:
            self._footer = bytearray(head)
            return
        stored, scheme, length = shards.chunk_header(head, len(self._sizes))
        self._scheme, self._stored, self._length = scheme, stored, length
        self._left = stored
        if stored == 0:
            self._end(memoryview(b""))

    def _end(self, stored: memoryview) -> None:
        """A chunk's bytes are all in (``stored``): its hash and length kept."""
        if self._scheme == 0:
            if self._stored != self._length:
                raise BadUpload(f"a chunk is {self._stored} bytes, its header says {self._length}")
            digest = merkle.chunk_hash(stored)
        else:
            digest = merkle.chunk_hash(shards.decompress(self._scheme, bytes(stored), self._length))
        stored.release()
        self._parts.clear()  # (after the view of it is released: a bytearray viewed cannot shrink)
        self._hashes += digest
        self._sizes.append(self._length)

    def result(self, want: bytes) -> tuple[str | None, ChunkList]:
        """Why the body fed is not the xorb ``want`` (None: it is), and its chunks."""
        if self.problem is None and self._left:
            self.problem = f"chunk {len(self._sizes)} runs past the end of the xorb"
        elif self.problem is None and self._head and self._head[:len(FOOTER_IDENT)] != FOOTER_IDENT:
            self.problem = "the xorb ends inside a chunk header"  # (a footer cut short names nothing)
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
