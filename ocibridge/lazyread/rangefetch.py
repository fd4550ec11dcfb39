"""The one place a verified read fetches bytes: one Range request for ``[start, end)`` of a
layer, received a chunk at a time into the memory the caller names and checked against the
chunk table (or the layer digest) as each chunk lands, its bytes counted and, with a budget,
reserved first. Both readers go through it: ranges of one file (``lazyread.blobreader``) and
whole-model loads (``lazyread.tensorload``), whatever the tensor format.
"""

from __future__ import annotations

from collections.abc import Callable

from ocibridge.errors import RegistryError
from ocibridge.lazyread.budget import ReadBudget
from ocibridge.lazyread.landcheck import LandCheck
from ocibridge.lazyread.rangetail import SplitRange
from ocibridge.oci.models import Descriptor
from ocibridge.stores.ranged import RangedBlobSource, read_full

#: where a range's bytes land: writable views that together are ``[a, b)``, in order
ViewsOf = Callable[[int, int], list[memoryview]]


class EndedEarly(RegistryError):
    """The registry's body ended before the range did: bytes ``[start, end)`` (one unit) are short."""

    def __init__(self, message: str, start: int, end: int):
        super().__init__(message)
        self.start = start
        self.end = end


class Stopped(Exception):
    """The read was stopped (an error elsewhere, or the caller): the request ends quietly."""


def fetch_checked(source: RangedBlobSource, layer: Descriptor, start: int, end: int, check: LandCheck,
                  views_of: ViewsOf, *, counted: Callable[[int], None], where: str,
                  budget: ReadBudget | None = None, stopped: Callable[[], bool] | None = None,
                  landed: Callable[[int], None] | None = None, shared: SplitRange | None = None) -> bool:
    """Bytes ``[start, end)`` of ``layer`` in one Range request into ``views_of(a, b)`` a unit
    (a chunk) at a time, each unit checked by ``check`` as soon as it is in (wrong bytes raise
    its ``Mismatch``), then ``landed(a)``. ``counted(n)``: bytes received; ``stopped()``: end
    before the next unit (raises :class:`Stopped`); ``shared``: the range, whose end another
    request may move back meanwhile (the response is then closed there, unread to its end).
    True: the file is now verified whole (no table, and this call hashed its last byte)."""
    reading = shared if shared is not None else SplitRange(start, end, check.unit)
    if budget is not None:
        budget.take(end - start, f"{layer.digest} bytes {start}-{end}")
    reader = source.open_blob_range(layer, start, end)
    verified = False
    try:
        at = start
        while (stop := reading.next_stop(at)) > at:
            if stopped is not None and stopped():
                raise Stopped
            views = views_of(at, stop)
            for view in views:
                got = read_full(reader, view)
                counted(got)
                if got != len(view):
                    raise EndedEarly(f"{where}: the registry ended bytes {start}-{end} of {layer.digest} early",
                                     at, stop)
            verified = check.landed(at, views) or verified
            if landed is not None:
                landed(at)
            at = stop
    finally:
        reader.close()
    return verified
