"""What a store can do for a resumable, ranged download: the capabilities and the plan.

Apart from :mod:`.partial` (which does the downloading), so that code that only asks whether
a store has these capabilities, a copy that mounts every blob for one, does not load the
download machinery, its threads and buffers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable

from ocibridge.oci.models import Descriptor


@dataclass(frozen=True)
class RangedPlan:
    """How a large blob is fetched: parts of ``part_size`` bytes, up to ``parts_in_flight``
    at once. Blobs under two parts come in one stream."""

    part_size: int = 32 * 1024 * 1024
    parts_in_flight: int = 16
    #: Start with one part and add parts while the rate rises (:mod:`.part_governor`);
    #: ``False``: always ``parts_in_flight`` (``--parts N``).
    adaptive: bool = True


class RangeReader(Protocol):
    """A reader of bytes ``[start, end)`` of a blob (unverified: the writer hashes)."""

    @property
    def ranged(self) -> bool:
        """Whether the server honoured the Range (else the reader streams from ``start``
        to the blob's end, having skipped what came before)."""
        ...

    def readinto(self, buffer: memoryview) -> int:
        """Fill ``buffer`` (fewer bytes only at the end of the range; 0 after it)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class LandingReader(Protocol):
    """A range reader that writes its next bytes into a file itself: a plain-HTTP body is
    spliced from the socket inside the kernel, never copied through the process
    (stores/registry/splicing.py)."""

    def land_into(self, fd: int, offset: int, count: int) -> int | None:
        """Up to ``count`` bytes written into ``fd`` at ``offset`` (0 only at the end of the
        range); None when this reader cannot (then: ``readinto``)."""
        ...


@runtime_checkable
class ReadsWholeAnswer(Protocol):
    """A range reader whose server ignored the Range (a 200 with the whole blob) that can hand
    over that whole answer instead of the range: the bytes before the range kept, not skipped,
    and read on to the blob's end, so the reader holds the whole blob with no second request."""

    def read_whole_answer(self) -> None:
        """From now on (before any byte is read), read the blob from byte 0 to its end."""
        ...

    def read(self, n: int = -1) -> bytes: ...


@runtime_checkable
class RangedBlobSource(Protocol):
    """A store that can send part of a blob (a registry: HTTP Range), with its own plan for
    how many parts of what size to ask at once."""

    ranged_plan: RangedPlan

    def open_blob_range(self, desc: Descriptor, start: int, end: int | None = None, *,
                        probe: bool = False) -> RangeReader:
        """``probe``: ask with a Range even for the whole blob, so that ``ranged`` says
        whether the server sends parts."""
        ...


ByteCount = Callable[[int], None]


class RangedStore(RangedBlobSource, Protocol):
    """A ranged source that also reads a blob whole, verified: where a pull's delta reads the
    chunk table it needs when its first layer is fetched."""

    def open_blob(self, desc: Descriptor) -> BinaryIO: ...


def read_full(reader: RangeReader, view: memoryview) -> int:
    """Fill ``view`` from ``reader``: the bytes read, fewer only where the range (or the
    server's answer) ended."""
    got = 0
    while got < len(view):
        n = reader.readinto(view[got:])
        if not n:
            break
        got += n
    return got


@runtime_checkable
class ResumableBlobSink(Protocol):
    """A store that writes a blob into a file it can resume (a layout)."""

    def download_blob(self, desc: Descriptor, source: RangedBlobSource,
                      on_bytes: ByteCount | None = None) -> None:
        ...


@runtime_checkable
class DeltaBuilder(Protocol):
    """Builds a blob from chunks held locally plus Range requests for the rest (a delta:
    chunks/delta.py), where a chunk table allows it."""

    def build(self, final: Path, desc: Descriptor, source: RangedStore,
              on_bytes: ByteCount | None = None) -> bool:
        """``desc`` at ``final`` (verified), True; False when nothing local can be reused (the
        caller downloads it whole)."""
        ...
