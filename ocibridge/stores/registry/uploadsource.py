"""The bytes of a blob being uploaded (:mod:`.upload`), able to go back to an offset: a resumed
or restarted upload sends again from where the registry's session stands.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO

from ocibridge.core import interrupt
from ocibridge.core.streams import can_seek
from ocibridge.errors import DigestMismatch, OcibridgeError
from ocibridge.oci.digest import CHUNK

#: how a source that cannot seek is read again from its start
Reopen = Callable[[], BinaryIO]


class UploadSource:
    """The blob's bytes to send, able to go back to an offset by seek() or by reopening."""

    def __init__(self, reader: BinaryIO, reopen: Reopen | None):
        self.reader = reader
        self.reopen = reopen
        self.pos = 0
        self._reopened = False

    def seekable(self) -> bool:
        return can_seek(self.reader)

    def can_rewind(self) -> bool:
        return self.seekable() or self.reopen is not None

    def go_to(self, offset: int) -> None:
        if offset == self.pos:
            return
        if self.seekable():
            self.reader.seek(offset)
            self.pos = offset
            return
        if self.reopen is None:
            raise OcibridgeError("the upload source cannot be read again")
        if self._reopened:
            self.reader.close()
        self.reader = self.reopen()
        self._reopened = True
        self.pos = 0
        while self.pos < offset:
            data = self.reader.read(min(CHUNK, offset - self.pos))
            if not data:
                raise OcibridgeError("the upload source ended before the resume offset")
            self.pos += len(data)

    def chunks(self, limit: int, on_chunk: Callable[[int], None], last: bool = False,
               check: Callable[[], None] = interrupt.check) -> Iterator[bytes]:
        """Up to ``limit`` bytes from the current position, streamed. With ``last``, the
        source is read to EOF before the final piece goes out, so a verifying source raises
        DigestMismatch while the request is still open and the registry commits nothing.
        ``check`` runs before each read (an interrupt stops the body there)."""
        left = limit
        while left > 0:
            check()
            data = self.reader.read(min(CHUNK, left))
            if not data:
                return
            self.pos += len(data)
            left -= len(data)
            if left == 0 and last and self.reader.read(1):
                raise DigestMismatch("the upload source holds more bytes than its descriptor says")
            on_chunk(len(data))
            yield data
        if limit == 0 and last and self.reader.read(1):
            raise DigestMismatch("the upload source holds more bytes than its descriptor says")

    def close(self) -> None:
        if self._reopened:
            self.reader.close()
