"""What a xorb URL means: the layout it was issued under (the bytes of a chunk, the chunks of a
xorb), named in the URL and covered by its signature.

Why: the ``k``-th xorb of a file is a different region of it under another layout, and
``hf_xet`` checks no hash of what it receives. Replicas behind one Service answer each other's
URLs, and in a rolling upgrade they run different releases: a URL that left its layout unsaid
got a 404 from a replica of another layout, or the bytes of another region. So a URL says
``layout={chunks}x{chunk}``, and serve answers the layout it names, any within hf_xet's bounds.

A URL without one means :data:`UNMARKED` (1024 chunks of 64 KiB), what serve issued before URLs
named their layout, and what they name now. Its signature is over the path alone, as before
(:func:`signed_path`), so a replica of that release, which signs and checks the path and ignores
a query it does not know, answers this release's URLs as its own, and this release answers its
URLs; any other layout is signed with the path (``path?layout=...``), which an older replica
refuses (403) rather than send another region, and which no client can alter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ocibridge.hubserver.signer import Signer

#: the query parameter that names a xorb URL's layout
PARAM = "layout"
#: hf_xet's bounds (xet-core's, which the uploads hf_xet makes keep too: .shards): a chunk of at
#: most 128 KiB, a xorb of at most 8192 chunks and 64 MiB of data;
#: and serve's own floor: a chunk of at least 4 KiB (each chunk is a header and a segment of the
#: send, so a smaller one only multiplies serve's work a byte; Xet's own chunks are 8-128 KiB)
MIN_CHUNK = 4 * 1024
MAX_CHUNK = 128 * 1024
MAX_CHUNKS = 8 * 1024
MAX_XORB_DATA = 64 * 1024 * 1024
_FORM = re.compile(r"([0-9]{1,9})x([0-9]{1,9})")


class BadLayout(ValueError):
    """A layout that is no number pair, or is past hf_xet's bounds."""


@dataclass(frozen=True)
class Layout:
    """``chunks`` chunks a xorb, each of ``chunk`` bytes (the last of a file shorter)."""

    chunk: int
    chunks: int

    def __post_init__(self) -> None:
        if not MIN_CHUNK <= self.chunk <= MAX_CHUNK:
            raise BadLayout(f"a chunk of {self.chunk} bytes: serve answers {MIN_CHUNK} to {MAX_CHUNK}")
        if not 0 < self.chunks <= MAX_CHUNKS:
            raise BadLayout(f"a xorb of {self.chunks} chunks: hf_xet takes 1 to {MAX_CHUNKS}")
        if self.chunk * self.chunks > MAX_XORB_DATA:
            raise BadLayout(f"a xorb of {self.chunks} chunks of {self.chunk} bytes: hf_xet takes at most "
                            f"{MAX_XORB_DATA} bytes of data a xorb")

    def query(self) -> str:
        return f"{PARAM}={self.chunks}x{self.chunk}"

    def chunk_count(self, size: int) -> int:
        """Chunks of a file of ``size`` bytes."""
        return -(-size // self.chunk)

    def xorb_count(self, size: int) -> int:
        """Xorbs of a file of ``size`` bytes."""
        return -(-self.chunk_count(size) // self.chunks)


#: what a xorb URL without a layout means: the layout serve issued before URLs named theirs.
#: Fixed for good (URLs of those releases are still answered by it), whatever serve issues now.
UNMARKED = Layout(chunk=64 * 1024, chunks=1024)


def parse(value: str | None) -> Layout:
    """The layout a URL's ``layout`` parameter names (none: :data:`UNMARKED`); raises
    :class:`BadLayout` for one that is not ``{chunks}x{chunk}`` in hf_xet's bounds."""
    if value is None:
        return UNMARKED
    named = _FORM.fullmatch(value)
    if named is None:
        raise BadLayout(f"{PARAM}={value!r} is not {{chunks}}x{{chunk bytes}}, as 1024x65536")
    return Layout(chunk=int(named[2]), chunks=int(named[1]))


def signed_path(path: str, layout: Layout) -> str:
    """What a xorb URL's signature covers: its path, and its layout unless that is :data:`UNMARKED`
    (which a URL with no layout means, so a client can neither add nor drop another)."""
    return path if layout == UNMARKED else f"{path}?{layout.query()}"


def signed_url(signer: Signer, path: str, layout: Layout, expires: int, client: str) -> str:
    """``path`` (a xorb's) signed for ``client`` until ``expires``, naming ``layout`` (always,
    :data:`UNMARKED` too: what a URL says is plain to whoever reads it)."""
    url = signer.signed(signed_path(path, layout), expires, client)
    if layout == UNMARKED:
        url += f"{'&' if '?' in url else '?'}{layout.query()}"
    return url
