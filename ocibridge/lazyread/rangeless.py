"""Lazy reads from a registry (or a proxy, a CDN in front of it) that answers a Range with
``200`` and the whole blob. Each range read would fetch the blob from byte 0 again, a
quadratic amount for a file read chunk by chunk; instead, after the first such answer the blob
is read whole once into a temporary spool file, verified by its digest, and every range of it
is served from there (still checked by the reader's chunk table, as a fetched range is). That
first answer is the copy, whatever range it answered: the bytes before the range are kept. The
host is noted, so that other readers ask it for no range at all, and said once; the note lapses after
:data:`NOTE_LIFETIME` (one stray answer of a CDN is not a long-running serve's rule until restart).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

from ocibridge.lazyread.budget import ReadBudget
from ocibridge.lazyread.chunkstore import StoredLayer
from ocibridge.lazyread.wholeblob import download_whole, spool_answer
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import ReadableStore
from ocibridge.stores.ranged import RangedBlobSource, RangedPlan, RangeReader, ReadsWholeAnswer

NOTICE = logging.getLogger("ocibridge.lazyread")

#: seconds a host stays noted as ignoring ranges; then its ranges are asked again (and it is noted again if need be)
NOTE_LIFETIME = 600.0

_hosts_lock = threading.Lock()
_rangeless_hosts: dict[str, float] = {}  # host -> when it was noted (time.monotonic)
_said: set[str] = set()


class LazySource(ReadableStore, RangedBlobSource, Protocol):
    """A store that can both read a blob whole (verified) and send parts of it (a registry)."""


def host_of(where: str) -> str:
    """The host part of a store's description (a registry's is ``host/repository``)."""
    return where.partition("/")[0]


def ignores_ranges(where: str) -> bool:
    """Whether the registry named by ``where`` was seen answering a Range with the whole blob."""
    host = host_of(where)
    with _hosts_lock:
        noted = _rangeless_hosts.get(host)
        if noted is None:
            return False
        if time.monotonic() - noted < NOTE_LIFETIME:
            return True
        del _rangeless_hosts[host]
        return False


def note_rangeless(where: str) -> None:
    """Remember that ``where``'s host ignores ranges; the first time, say so."""
    host = host_of(where)
    with _hosts_lock:
        _rangeless_hosts[host] = time.monotonic()
        if host in _said:
            return
        _said.add(host)
    NOTICE.warning("%s answers range requests with whole blobs: lazy reads from it fetch each "
                   "blob whole, once, into a temporary file", host)


def forget_rangeless() -> None:
    """Forget every host noted (a test that starts from a clean process state)."""
    with _hosts_lock:
        _rangeless_hosts.clear()
        _said.clear()


class _Whole:
    """One blob's spool, fetched by the first reader that needs it (the others wait)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spool: StoredLayer | None = None


class WholeWhenRangeless:
    """``source``'s ranges (a :class:`RangedBlobSource`), except of a blob whose registry
    ignores ranges: those come from the blob read whole once. Thread-safe; :meth:`close` drops
    the spool files."""

    def __init__(self, source: LazySource, budget: ReadBudget | None = None):
        self._source = source
        self._budget = budget
        self.ranged_plan: RangedPlan = source.ranged_plan
        self._lock = threading.Lock()
        self._wholes: dict[str, _Whole] = {}

    def whole_only(self, desc: Descriptor) -> bool:
        """Whether ranges of ``desc`` come from its whole copy (no Range is asked for them)."""
        with self._lock:
            if desc.digest in self._wholes:
                return True
        return ignores_ranges(self._source.describe())

    def open_blob_range(self, desc: Descriptor, start: int, end: int | None = None, *,
                        probe: bool = False) -> RangeReader:
        stop = desc.size if end is None else min(end, desc.size)
        part = start > 0 or stop < desc.size
        if not part or not self.whole_only(desc):
            reader = self._source.open_blob_range(desc, start, end, probe=probe)
            if reader.ranged or not part:
                return reader
            note_rangeless(self._source.describe())
            # that answer carries the whole blob from byte 0, whatever the range: it is the copy
            return _SpoolRange(self._whole(desc, reader), start, stop)
        return _SpoolRange(self._whole(desc), start, stop)

    def _whole(self, desc: Descriptor, answer: RangeReader | None = None) -> StoredLayer:
        """The blob's verified copy: ``answer`` (a 200 to a Range) read whole from byte 0 if
        there is none yet, else downloaded; a failure leaves it to the next read."""
        with self._lock:
            whole = self._wholes.setdefault(desc.digest, _Whole())
        with whole.lock:
            if whole.spool is None and isinstance(answer, ReadsWholeAnswer):
                answer.read_whole_answer()
                whole.spool = spool_answer(answer, desc, self._budget)
                return whole.spool
            if answer is not None:
                answer.close()
            if whole.spool is None:
                whole.spool = download_whole(self._source, desc, self._budget, lambda _n: None)
            return whole.spool

    def close(self) -> None:
        with self._lock:
            wholes, self._wholes = list(self._wholes.values()), {}
        for whole in wholes:
            with whole.lock:
                if whole.spool is not None:
                    whole.spool.close()
                    whole.spool = None


class _SpoolRange:
    """Bytes ``[start, end)`` of a verified whole copy, as a range reader."""

    ranged = True

    def __init__(self, spool: StoredLayer, start: int, end: int):
        self._spool = spool
        self._at = start
        self._end = end

    def readinto(self, buffer: memoryview) -> int:
        n = min(len(buffer), self._end - self._at)
        if n <= 0:
            return 0
        data = self._spool.read_at(self._at, n) or b""
        buffer[:len(data)] = data
        self._at += len(data)
        return len(data)

    def close(self) -> None:
        pass
