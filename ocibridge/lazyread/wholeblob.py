"""A blob without a chunk table, read whole once so its ranges can be served verified: the
chunk store's copy if it hashes to the layer digest now, else a download into a temporary
spool file, checked against that digest as it ends. :mod:`.blobreader` serves ranges from it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, BinaryIO

from ocibridge.core.fsutil import pread_full
from ocibridge.core.streams import Reader
from ocibridge.lazyread.budget import ReadBudget
from ocibridge.lazyread.chunkstore import ChunkStore, StoredLayer
from ocibridge.oci.digest import VerifyingReader, sha256_chunks
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import ReadableStore

_SPOOL_PIECE = 1024 * 1024


def stored_whole(store: ChunkStore, layer: Descriptor, heard: Callable[[], None]) -> StoredLayer | None:
    """The store's copy of the blob under its layer digest (a pull into the model cache), used
    only if it hashes to that digest now: the chunks of no table vouch for it. ``heard`` is
    called per piece checked (a check going on is no stall)."""
    copy = store.open_blob(layer.digest)
    if copy is None:
        return None
    if copy.size() == layer.size and sha256_chunks(_pieces(copy, layer.size, heard)) == (layer.digest, layer.size):
        return copy
    copy.close()
    return None


def download_whole(source: ReadableStore, layer: Descriptor, budget: ReadBudget | None,
                   landed: Callable[[int], None]) -> StoredLayer:
    """The blob fetched whole into a temporary spool file (the source's reader verifies digest
    and size at its end); ``landed`` is told each piece's size as it is written."""
    if budget is not None:
        budget.take(layer.size, f"{layer.digest} read whole")
    return _spooled(source.open_blob(layer), landed)


def spool_answer(answer: Reader, layer: Descriptor, budget: ReadBudget | None) -> StoredLayer:
    """The blob from ``answer``, a registry's answer that carries it whole from byte 0 (a
    Range it ignored), into a temporary spool file, checked against the layer digest and
    size as it ends; ``answer`` is closed whatever happens (a budget's refusal too)."""
    verifying = VerifyingReader(answer, layer.digest, layer.size)
    if budget is not None:
        try:
            budget.take(layer.size, f"{layer.digest} read whole")
        except BaseException:
            verifying.close()
            raise
    return _spooled(verifying, lambda _n: None)


def _spooled(verifying: VerifyingReader | BinaryIO, landed: Callable[[int], None]) -> StoredLayer:
    spool = tempfile.TemporaryFile(prefix="ocibridge-lazy-")  # noqa: SIM115  # kept open: the reads serve from it
    try:
        with contextlib.closing(verifying) as reader:
            while True:
                piece = reader.read(_SPOOL_PIECE)
                if not piece:
                    break
                spool.write(piece)
                landed(len(piece))
        spool.flush()
    except BaseException:
        spool.close()
        raise
    return _Spool(spool)


def _pieces(stored: StoredLayer, size: int, heard: Callable[[], None] | None = None) -> Iterator[bytes]:
    """``stored``'s first ``size`` bytes, in constant memory (stops early at a short read)."""
    for at in range(0, size, _SPOOL_PIECE):
        piece = stored.read_at(at, min(_SPOOL_PIECE, size - at))
        if not piece:
            return
        if heard is not None:
            heard()
        yield piece


class _Spool:
    """The whole blob downloaded into a temporary file (a :class:`StoredLayer`)."""

    def __init__(self, file: IO[bytes]):
        self._file = file

    def read_at(self, offset: int, size: int) -> bytes | None:
        return pread_full(self._file.fileno(), size, offset)  # (a read of 2 GiB or more: several preads)

    def size(self) -> int:
        return os.fstat(self._file.fileno()).st_size

    def close(self) -> None:
        self._file.close()
