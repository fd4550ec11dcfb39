"""The first bytes of a tensor file as a whole-model load reads its header (``lazyread.formats``):
fetched, and verified, a piece at a time as far as the header reaches; what follows the header
in its last piece is kept for the tensors there.

Its room at least doubles when it grows: a GGUF header (a tokenizer's strings) may span many
pieces, and room grown by one piece at a time would copy every piece before it again, a
quadratic amount of copying.
"""

from __future__ import annotations

from collections.abc import Callable

from ocibridge.lazyread.rangefetch import ViewsOf

#: receive bytes ``[a, b)`` of the file into the views given (True: the file is now verified whole)
Receive = Callable[[int, int, ViewsOf], bool]


class HeaderPrefix:
    """Bytes from the first of a file of ``size`` bytes, received in whole pieces of ``unit``."""

    def __init__(self, size: int, unit: int, receive: Receive):
        self.size = size
        self._unit = unit
        self._receive = receive
        self._room = bytearray()
        self._have = 0  # bytes of ``_room`` received, from the first
        self.verified = False  # the file is all received, and matched its digest (no table)

    @property
    def data(self) -> bytearray:
        """The bytes received (whole pieces: the header and what follows it in its last piece)."""
        if len(self._room) > self._have:
            self._room = self._room[:self._have]  # (once, when the header is read)
        return self._room

    def read(self, start: int = 0, end: int | None = None) -> bytes:
        end = self.size if end is None else min(end, self.size)
        have = self._have
        if end > have:
            want = min(self.size, -(-end // self._unit) * self._unit)
            if want > len(self._room):  # (a header past the first piece: rare)
                room = bytearray(min(self.size, max(want, 2 * len(self._room))))
                room[:have] = memoryview(self._room)[:have]
                self._room = room
            room = self._room
            self.verified = self._receive(have, want, lambda a, b: [memoryview(room)[a:b]])
            self._have = want
        return bytes(self._room[start:end])
