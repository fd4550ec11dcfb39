"""A kept xorb's chunks read back for the build ahead of its shard (:mod:`.ahead`), a buffer's
worth at a time through one buffer. Where the xorb's check gave its chunks' lengths, the bodies
of chunks stored as they are (random weights are: nothing to compress) are read side by side by
one ``preadv``, their headers apart: a batch is then one view, hashed in one call per hash and
sent as one piece, instead of a call for each chunk between its headers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from ocibridge.core.fsutil import IOV_MAX
from ocibridge.hubserver.xet import shards
from ocibridge.hubserver.xet.shards import BadUpload

HEADER = shards.HEADER


def gathered_batches(fd: int, lengths: Sequence[int], end: int | None,
                     buf: bytearray) -> Iterator[list[memoryview]]:
    """Chunks ``[0, end)`` (all of ``lengths`` when None) of the xorb open as ``fd``, whose
    chunks' lengths its check found to be ``lengths``: as :func:`chunk_batches` gives them, but
    a run of chunks stored as they are comes as one view of ``buf``. Each header is checked as
    read; from the first that says otherwise (a compressed chunk) the rest is read as
    :func:`chunk_batches` reads it."""
    count = len(lengths) if end is None else min(end, len(lengths))
    heads = bytearray(HEADER * (IOV_MAX // 2))
    view, head_view = memoryview(buf), memoryview(heads)
    start, k = 0, 0
    while k < count:
        parts: list[memoryview] = []
        body, j = 0, k
        while j < count and len(parts) < IOV_MAX - 1 and body + lengths[j] <= len(buf):
            parts += [head_view[HEADER * (j - k):HEADER * (j - k + 1)], view[body:body + lengths[j]]]
            body += lengths[j]
            j += 1
        n = os.preadv(fd, parts, start) if parts else 0
        at, body, whole = 0, 0, k
        while whole < j and n - at >= HEADER + lengths[whole]:
            head = heads[HEADER * (whole - k):HEADER * (whole - k + 1)]
            stored, scheme, length = shards.chunk_header(head, whole)
            if scheme != 0 or stored != length or length != lengths[whole]:
                break
            at += HEADER + length
            body += length
            whole += 1
        if body:
            yield [view[:body]]
        start, k = start + at, whole
        if whole < j or not parts:  # not as gathered: the rest chunk by chunk, from here
            yield from chunk_batches(fd, k, end, buf, start=start, k=k)
            return
    if end is not None and end > count:
        yield from chunk_batches(fd, k, end, buf, start=start, k=k)


def chunk_batches(fd: int, first: int, end: int | None, buf: bytearray, start: int = 0,
                  k: int = 0) -> Iterator[list[memoryview]]:
    """The bytes of chunks ``[first, end)`` (to the last when ``end`` is None) of the verified
    xorb open as ``fd``, a buffer's worth at a time: views of ``buf`` for chunks stored as they
    are, decompressed copies for the others. Each batch is read into ``buf`` again, so it must be
    used (and let go) before the next. ``start``: the offset of chunk ``k``, where reading
    begins. :class:`BadUpload` when the xorb is not as it was."""
    view = memoryview(buf)
    while end is None or k < end:
        n = os.preadv(fd, [view], start)
        at, batch = 0, list[memoryview]()
        while n - at >= HEADER and len(batch) < IOV_MAX and (end is None or k < end):
            head = buf[at:at + HEADER]
            if head[:len(shards.FOOTER_IDENT)] == shards.FOOTER_IDENT:
                n = at  # the chunks ended
                break
            stored, scheme, length = shards.chunk_header(head, k)
            if n - at < HEADER + stored:
                break
            if k >= first:
                body = view[at + HEADER:at + HEADER + stored]
                batch.append(body if scheme == 0 and stored == length
                             else memoryview(shards.decompress(scheme, bytes(body), length)))
            at += HEADER + stored
            k += 1
        if batch:
            yield batch
            del batch
        if at == 0:  # nothing whole left: the end of the chunks, or of the file
            if n > 0 and end is not None:
                raise BadUpload(f"the xorb holds no chunk {end - 1} whole")
            break
        start += at
    if end is not None and k < end:
        raise BadUpload(f"the xorb holds no chunk {end - 1}")
