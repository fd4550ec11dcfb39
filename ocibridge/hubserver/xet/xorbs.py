"""Large files over Xet, the protocol huggingface_hub hands Hub files to (``hf_xet``, in Rust).

Why: through the Hub's plain ``resolve`` route, huggingface_hub reads a file on one connection
into fresh 10 MB buffers from Python; its own CPU exceeds a whole ``ocibridge pull``
(docs/benchmarks.md). Given a file's Xet name, it hands the download to ``hf_xet``, which asks
where the file's pieces are and fetches them on parallel connections.

What serve says, as the Xet CAS API has it (facts from xet-core's client and its local server):

- ``X-Xet-Hash`` on ``resolve`` (and ``xetHash`` in tree entries) names the file, and
  ``X-Xet-Refresh-Route`` the route that grants an access token for the repo's commit
  (``/api/models/{repo}/xet-read-token/{commit}``: ``X-Xet-Cas-Url``, ``X-Xet-Access-Token``,
  ``X-Xet-Token-Expiration``).
- ``GET {cas}/v2/reconstructions/{file}`` (and ``v1``), with an optional ``Range``: the terms
  that make up the bytes asked for, and for each "xorb" the URL and byte range that carry them.
- A xorb is the file's bytes in chunks of :data:`XET_CHUNK`, each behind an 8-byte header (version 0,
  stored length, scheme 0 = stored as is, length); :data:`XORB_CHUNKS` chunks a xorb. Those are
  the layout serve issues (:data:`ISSUED`); a xorb URL names its own, and is answered in it
  (:mod:`.layouts`: replicas of other releases answer each other's URLs).

The names are serve's own, not the Hub's Xet hashes: those are Merkle hashes over content-defined
chunks, and finding those chunks means a rolling hash over every byte before the first answer.
Serve names a file by its SHA-256 and size, and a xorb by the file and its place in it
(:func:`file_id`, :func:`xorb_id`), so equal names mean equal bytes. ``hf_xet`` checks no hash of
what it receives (xet-core reconstructs without one), so what keeps a wrong byte out of the
client's file is serve's own rule: a xorb is sent only from verified bytes: a verified file (the
model cache's blob, a snapshot file), or the part of a registry fetch its chunk table has
checked so far (the whole blob once its digest matched, when the manifest binds no table).
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from ocibridge.errors import DigestMismatch
from ocibridge.hubserver.xet.layouts import Layout
from ocibridge.hubserver.zerocopy import ClientGone, ClientStalled, Segment, drop, send_direct, size_of

if TYPE_CHECKING:
    from ocibridge.hubserver.guard import Shares, Turn
    from ocibridge.hubserver.reading.blobs import Checked

#: bytes of a chunk: Xet's target size (hf_xet refuses a chunk over 128 KiB)
XET_CHUNK = 64 * 1024
#: chunks of a xorb: 64 MiB of the file, a request of hf_xet each (a xorb holds at most 8192 and
#: 64 MiB of data: the Hub's are as large). Each request costs serve's loop its parsing, routing
#: and hand-overs, and hf_xet opens as many connections as it has requests under way: a warm
#: 1 GiB read cost serve 0.39 s of CPU in 64 xorbs of 16 MiB, 0.33 in 32 MiB ones, 0.25 in 16 of
#: 64 MiB (splice sends; docs/benchmarks.md "serve's warm Xet sends"). hf_xet itself spends
#: about 0.4 s more a GiB on 64 MiB xorbs than on 16 MiB ones (as it does against the Hub).
XORB_CHUNKS = 1024
#: the layout of the xorbs serve's reconstructions name (a xorb URL is answered in the one it names)
ISSUED = Layout(chunk=XET_CHUNK, chunks=XORB_CHUNKS)
#: a chunk's header: version, stored length (3 bytes, little-endian), scheme, length (3 bytes)
HEADER = 8
#: chunks read from the file per piece handed to the server (1 MiB)
PIECE_CHUNKS = 16
#: pieces a send from a fetch under way waits for past the first (4 MiB): each hand-over to a
#: sender thread costs a wake of the loop, a thread hop and a buffer, so a cold read's sends are
#: fewer and larger (the first piece of an answer still goes as soon as it is verified)
SEND_AHEAD = 4

#: xorb answers being sent at once, over every client: what bounds serve's memory when many
#: clients each open many xorb requests (hf_xet's concurrency adapts upward); the others wait
#: their turn. An answer holds about three pieces: the one read, the server's copy of it, and
#: what the socket has not taken yet (uvicorn waits for the socket before the next write, not
#: after this one), so a permit per piece let each waiting request keep a piece: with 16
#: clients serve's RSS grew past 900 MiB.
SENDING_AT_ONCE = 32
#: of those, the most one client (one read token) holds at once: others always find permits
SHARE = SENDING_AT_ONCE // 2


@functools.lru_cache(maxsize=4096)
def file_id(sha256: str, size: int) -> str:
    """The Xet name of a file: of its SHA-256 and size (64 hex digits, as hf_xet takes it)."""
    return hashlib.sha256(f"ocibridge-xet-file-v1 {sha256} {size} {XET_CHUNK}".encode()).hexdigest()


def xorb_id(sha256: str, size: int, layout: Layout, k: int) -> str:
    """The name of the ``k``-th xorb of a file in ``layout``: equal names hold equal bytes."""
    text = f"ocibridge-xet-xorb-v1 {sha256} {size} {layout.chunk} {layout.chunks} {k}"
    return hashlib.sha256(text.encode()).hexdigest()


@functools.lru_cache(maxsize=64)
def _header(length: int) -> bytes:
    n = length.to_bytes(3, "little")
    return b"\x00" + n + b"\x00" + n


def _stored(size: int, layout: Layout, first: int, end: int) -> tuple[int, int]:
    """File bytes and xorb bytes of file chunks ``[first, end)``."""
    data = min(size, end * layout.chunk) - first * layout.chunk
    return data, data + HEADER * (end - first)


def reconstruction(sha256: str, size: int, layout: Layout, start: int, end: int, url_of: Callable[[int], str],
                   version: int = 2) -> dict[str, Any]:
    """The answer to ``GET /v{version}/reconstructions/{file}`` for file bytes ``[start, end)``:
    every xorb of ``layout`` those bytes are in, the chunks of it they span and where those are
    (``url_of(k)``, a URL that names ``layout``)."""
    chunk, per = layout.chunk, layout.chunks
    first, last = start // chunk, layout.chunk_count(end)
    terms: list[dict[str, Any]] = []
    where: dict[str, list[dict[str, Any]]] = {}
    for k in range(first // per, (last - 1) // per + 1):
        base = k * per
        lo, hi = max(first, base), min(last, base + per)
        data, stored = _stored(size, layout, lo, hi)
        at = (lo - base) * (chunk + HEADER)
        name = xorb_id(sha256, size, layout, k)
        chunks = {"start": lo - base, "end": hi - base}
        stored_range = {"start": at, "end": at + stored - 1}
        terms.append({"hash": name, "unpacked_length": data, "range": chunks})
        if version == 1:
            where.setdefault(name, []).append({"range": chunks, "url": url_of(k), "url_range": stored_range})
        else:
            where.setdefault(name, []).append({"url": url_of(k), "ranges": [{"chunks": chunks,
                                                                             "bytes": stored_range}]})
    answer: dict[str, Any] = {"offset_into_first_range": start - first * chunk, "terms": terms}
    answer["fetch_info" if version == 1 else "xorbs"] = where
    return answer


def xorb_size(size: int, layout: Layout, k: int) -> int:
    """Bytes of the ``k``-th xorb of ``layout`` as sent."""
    base = k * layout.chunks
    return _stored(size, layout, base, min(layout.chunk_count(size), base + layout.chunks))[1]


def _frame(size: int, layout: Layout, first: int, end: int) -> tuple[bytearray, list[memoryview]]:
    """A buffer for file chunks ``[first, end)`` with their headers written, and the places
    their bytes go. Made on the event loop's thread, so every piece comes from one allocator
    arena (made on many worker threads, freed pieces stayed in each thread's arena: serve's RSS
    grew with the number of requests)."""
    buf = bytearray(_stored(size, layout, first, end)[1])
    view = memoryview(buf)
    targets = []
    at = 0
    for c in range(first, end):
        length = min(layout.chunk, size - c * layout.chunk)
        buf[at:at + HEADER] = _header(length)
        targets.append(view[at + HEADER:at + HEADER + length])
        at += HEADER + length
    return buf, targets


def _fill(fd: int, targets: list[memoryview], offset: int) -> None:
    """Read the file's bytes from ``offset`` straight into ``targets`` (one copy)."""
    want = sum(len(t) for t in targets)
    got = os.preadv(fd, targets, offset)
    if got != want:
        raise DigestMismatch(f"a verified file ended {want - got} bytes early")


def _piece(size: int, layout: Layout, k: int, c: int) -> tuple[int, int]:
    """Of the piece of the ``k``-th xorb starting at file chunk ``c``: the chunk it ends before,
    and the file offset it needs verified up to."""
    upto = min(layout.chunk_count(size), (k + 1) * layout.chunks, c + PIECE_CHUNKS)
    return upto, min(size, upto * layout.chunk)


def first_piece_end(size: int, layout: Layout, k: int, start: int) -> int:
    """The file offset the first piece of a xorb range sent from ``start`` ends at."""
    return _piece(size, layout, k, k * layout.chunks + start // (layout.chunk + HEADER))[1]


def _segments(size: int, layout: Layout, first: int, end: int, skip: int, left: int) -> list[Segment]:
    """File chunks ``[first, end)`` as they are sent (each behind its header), less the first
    ``skip`` bytes and past ``left`` bytes: ``(header, file offset, count)`` each. The whole
    chunks are made at once (sharing one header), the ends of the range a
    chunk at a time."""
    chunk = layout.chunk
    out = _cut(size, layout, first, first + 1, skip, left) if skip else []
    c = first + 1 if skip else first
    left -= size_of(out)
    whole = max(0, min(min(end, size // chunk) - c, left // (chunk + HEADER)))
    full = _header(chunk)
    out += [(full, k * chunk, chunk) for k in range(c, c + whole)]
    return out + _cut(size, layout, c + whole, end, 0, left - whole * (chunk + HEADER))


def _cut(size: int, layout: Layout, first: int, end: int, skip: int, left: int) -> list[Segment]:
    """:func:`_segments` a chunk at a time (the partial chunks at the ends of a range)."""
    out: list[Segment] = []
    for c in range(first, end):
        if left <= 0:
            break
        length = min(layout.chunk, size - c * layout.chunk)
        head, offset, count = _header(length), c * layout.chunk, length
        cut = min(skip, HEADER)
        head, skip = head[cut:], skip - cut
        cut = min(skip, count)
        offset, count, skip = offset + cut, count - cut, skip - cut
        head = head[:left]
        count = min(count, left - len(head))
        left -= len(head) + count
        if head or count:
            out.append((head, offset, count))
    return out


def _verified_upto(source: Checked, size: int, layout: Layout, k: int, c: int, top: int) -> int:
    """The chunk a send from chunk ``c`` of the ``k``-th xorb may run to now: the xorb's end when
    it is all verified, else the end of the last whole piece verified (at least ``c``'s piece,
    which the caller waited for)."""
    if source.ready(min(size, top * layout.chunk)):
        return top
    upto = _piece(size, layout, k, c)[0]
    while upto < top:
        after, need = _piece(size, layout, k, upto)
        if not source.ready(need):
            break
        upto = after
    return upto


async def _opened(source: Checked) -> int:
    """A descriptor of ``source``'s file: a copy of the fetch's, made on the loop, where it runs
    (a cold read: a hop to a worker thread and back per xorb request saved), else opened on a
    worker thread."""
    held = source.open_held()
    return held if held is not None else await anyio.to_thread.run_sync(source.open)


async def xorb_body(source: Checked, size: int, layout: Layout, k: int, start: int, end: int,
                    gate: Shares, client: str, turn: Turn, scope: Any = None) -> AsyncGenerator[memoryview, None]:
    """Bytes ``[start, end)`` of the ``k``-th xorb of a file in ``layout``, each piece read once its file
    bytes are verified (at once from a verified file; as a registry fetch checks them: verified
    bytes of its file stay as they are, ``follow.Fill.until``). Verified bytes go straight to
    the socket from a worker thread where the server takes it (``scope``'s, :mod:`..zerocopy`:
    as much as is verified in one hand-over, a reused buffer, no permit), a cold read's as its
    fetch verifies them as a warm read's; where it does not (TLS), each piece is read and sent
    as a message while its ``turn`` holds a permit of ``gate`` (within ``client``'s share of
    them); it gives the permit back while it waits for the fetch (and the guard takes it back
    while its client does not read: :mod:`.guard`), and opens the file only with one (a queue
    of requests holds no descriptors)."""
    chunk = layout.chunk
    base = k * layout.chunks
    top = min(layout.chunk_count(size), base + layout.chunks)
    c = base + start // (chunk + HEADER)
    skip = start % (chunk + HEADER)
    left = end - start
    last = min(top, base + -(-end // (chunk + HEADER)))  # the chunk the range ends in, and after
    fd: int | None = None
    try:
        while left > 0 and c < top:
            upto, need = _piece(size, layout, k, c)
            if turn.held and not source.ready(need):
                turn.give_back()  # waiting for the registry: others may send meanwhile
            if scope is not None and left < end - start and not source.ready(need):
                # a send under way, the fetch behind it: wait for a few pieces at once
                await source.until(min(size, min(last, c + SEND_AHEAD * PIECE_CHUNKS) * chunk))
            await source.until(need)
            if scope is not None:
                if fd is None:
                    fd = await _opened(source)
                sending = _verified_upto(source, size, layout, k, c, top)
                segments = _segments(size, layout, c, sending, skip, left)
                try:
                    sent = await send_direct(scope, fd, segments)
                except (ClientGone, ClientStalled) as e:
                    await drop(scope, e)
                    return
                if sent is not None:
                    turn.give_back()
                    skip = 0
                    left -= sent
                    c = sending
                    continue
                # else the server takes none now (TLS, bytes it still holds): this piece as a message
            await turn.take(gate, client)
            if fd is None:
                fd = await _opened(source)
            piece, targets = _frame(size, layout, c, upto)
            await anyio.to_thread.run_sync(_fill, fd, targets, c * chunk)
            out = memoryview(piece)[skip:skip + left]  # a new buffer each piece: the server may keep it
            skip = 0
            left -= len(out)
            c = upto
            yield out
    finally:
        turn.give_back()
        if fd is not None:
            os.close(fd)
