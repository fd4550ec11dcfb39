"""Bytes handed from one thread to another without a file between them (issue 64): a Xet file
built from its verified xorbs goes to the registry as it is built, each byte copied once, from
the builder's buffer straight into the relay's, instead of written to a file the relay reads.

The writer hands views of its buffer (:meth:`Handoff.put`) and may fill another buffer while
they are read; before a put it waits until what it handed before has been read, so with two
buffers taken in turn it never writes into one the reader is still copying from.
"""

from __future__ import annotations

import io
import threading
from collections import deque
from collections.abc import Iterable

#: seconds either side waits for the other before it gives up (the relay's own patience)
PATIENCE = 300.0


class Handoff(io.RawIOBase):
    """A stream one thread writes views into and another reads (the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._cond = threading.Condition()
        self._parts: deque[memoryview] = deque()
        self._ended = False
        self._failed: str | None = None
        self._gone = False  # the reader stopped (closed): a writer waits for nothing

    def readable(self) -> bool:
        return True

    def put(self, parts: Iterable[memoryview]) -> None:
        """Hand ``parts`` over once what was handed before is read (:class:`OSError` when the
        reader is gone, or does not read for :data:`PATIENCE` seconds)."""
        with self._cond:
            if not self._cond.wait_for(lambda: not self._parts or self._gone, PATIENCE):
                raise OSError("the relay stopped reading")
            if self._gone:
                raise OSError("the relay is gone")
            self._parts.extend(p for p in parts if len(p))
            self._cond.notify_all()

    def ends(self) -> None:
        """Nothing more comes: the reader reads to the end of what was handed."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def fail(self, why: str) -> None:
        """The stream is abandoned: the reader's next read raises ``why``."""
        with self._cond:
            self._failed = why
            self._parts.clear()
            self._cond.notify_all()

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        with self._cond:
            if not self._cond.wait_for(lambda: self._parts or self._ended or self._failed is not None, PATIENCE):
                raise OSError("the build stalled")
            if self._failed is not None:
                raise OSError(self._failed)
            taken = 0
            while self._parts and taken < len(buffer):
                part = self._parts[0]
                n = min(len(part), len(buffer) - taken)
                buffer[taken:taken + n] = part[:n]
                taken += n
                if n == len(part):
                    self._parts.popleft()
                else:
                    self._parts[0] = part[n:]
            if not self._parts:
                self._cond.notify_all()  # the writer may reuse its buffer
            return taken

    def close(self) -> None:
        with self._cond:
            self._gone = True
            self._parts.clear()
            self._cond.notify_all()
        super().close()
