"""Where each byte of a safetensors file lands when a whole model is loaded into memory.

A load reads each file in long ranges; every byte of a range is received straight into the
memory of the tensor it belongs to (one buffer per tensor, which the returned array is a view
of), never into a buffer of its own first. The few bytes that belong to no tensor (the header,
padding between tensors) land in small scratch buffers, kept only until they are hashed.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ocibridge.lazyread.tensorfile import TensorInfo


@dataclass(eq=False)
class Slot:
    """One tensor of one file: where it lies, and once allocated the memory it lands in.
    ``waiting``: the checks its bytes still wait for (a verified range, the file's digest)."""

    file: str
    info: TensorInfo
    buffer: Any = None  # the framework's object that owns the memory (a numpy or torch array)
    view: memoryview | None = None  # writable bytes of ``buffer`` (None on a device: staged there)
    waiting: int = 0

    @property
    def nbytes(self) -> int:
        return self.info.end - self.info.start

    @property
    def allocated(self) -> bool:
        return self.buffer is not None


@dataclass(eq=False)
class Landing:
    """The tensors of one file in file order, and the memory each range of it lands in."""

    slots: list[Slot]
    _data: list[Slot] = field(init=False)  # the tensors of one byte or more: they share no byte
    _starts: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.slots.sort(key=lambda s: (s.info.start, s.info.end))
        self._data = [s for s in self.slots if s.nbytes]
        self._starts = [s.info.start for s in self._data]

    def overlapping(self, start: int, end: int) -> list[Slot]:
        """The tensors holding any byte of ``[start, end)`` (tensors of no bytes: none)."""
        i = max(0, bisect.bisect_right(self._starts, start) - 1)  # the one that may hold ``start``
        out = []
        for slot in self._data[i:]:
            if slot.info.start >= end:
                break
            if slot.info.end > start:
                out.append(slot)
        return out

    def views(self, start: int, end: int) -> list[memoryview]:
        """Writable views that together are ``[start, end)`` in order: the parts of the tensors
        there (allocated first), and fresh scratch for the bytes of no tensor."""
        out: list[memoryview] = []
        at = start
        for slot in self.overlapping(start, end):
            if slot.info.start > at:
                out.append(memoryview(bytearray(slot.info.start - at)))
                at = slot.info.start
            assert slot.view is not None, f"{slot.file}: {slot.info.name} lands before it is allocated"
            stop = min(slot.info.end, end)
            out.append(slot.view[at - slot.info.start:stop - slot.info.start])
            at = stop
        if at < end:
            out.append(memoryview(bytearray(end - at)))
        return out


def names(slots: Iterable[Slot]) -> str:
    """Tensor names for an error line: ``'a', 'b'`` (the first three, and how many more)."""
    listed = [repr(s.info.name) for s in slots]
    more = f" and {len(listed) - 3} more" if len(listed) > 3 else ""
    return ", ".join(listed[:3]) + more
