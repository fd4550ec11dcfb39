"""Bounded decoders for HTTP ``Content-Encoding`` (zstd, gzip, br, deflate): registry bodies, LINKS downloads.

httpx would decode these too, but it decodes a whole network chunk at once, so a small hostile
response could expand to gigabytes in one call. These decoders hand out at most the requested
number of bytes per read, whatever the input.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import zstandard

from ocibridge.core.streams import CHUNK, Reader, gunzip, unzstd

ACCEPT_ENCODING = "zstd, br, gzip, deflate"


class _Deflate:
    """HTTP "deflate" is zlib-wrapped, though some servers send raw deflate: both accepted."""

    def __init__(self, raw: Reader):
        self._raw = raw
        self._obj: zlib._Decompress | None = None
        self._tail = b""

    def read(self, n: int = CHUNK) -> bytes:
        while True:
            if self._obj is not None and self._obj.eof:
                return b""
            if self._tail:
                data, self._tail = self._tail, b""
            else:
                data = self._raw.read(CHUNK)
                if not data:
                    if self._obj is None:
                        return b""
                    raise zlib.error("deflate stream ends early")
            if self._obj is None:
                self._obj = zlib.decompressobj(zlib.MAX_WBITS if data[:1] == b"\x78" else -zlib.MAX_WBITS)
            out = self._obj.decompress(data, n)
            self._tail = self._obj.unconsumed_tail
            if out:
                return out


class _Brotli:
    def __init__(self, raw: Reader):
        import brotli  # optional dependency: only needed when a server answers with br

        self._raw = raw
        self._obj = brotli.Decompressor()
        self._error = brotli.error

    def read(self, n: int = CHUNK) -> bytes:
        while not self._obj.is_finished():
            if self._obj.can_accept_more_data():
                data = self._raw.read(CHUNK)
                if not data:
                    raise self._error("brotli stream ends early")
            else:
                data = b""
            out: bytes = self._obj.process(data, output_buffer_limit=n)
            if out:
                return out
        return b""


def _zstd(raw: Reader) -> Reader:
    return unzstd(raw)


def _gzip(raw: Reader) -> Reader:
    return gunzip(raw)


DECODERS: dict[str, Callable[[Reader], Reader]] = {
    "zstd": _zstd,
    "gzip": _gzip,
    "x-gzip": _gzip,
    "deflate": _Deflate,
    "br": _Brotli,
}


def decoding_reader(raw: Reader, content_encoding: str | None) -> Reader:
    """A reader of the decoded body; encodings applied in order are undone in reverse."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    reader = raw
    for coding in reversed(codings):
        if coding == "identity":
            continue
        if coding not in DECODERS:
            raise ValueError(f"unsupported Content-Encoding {coding!r}")
        reader = DECODERS[coding](reader)
    return reader


#: errors a decoder raises on corrupt input
DECODE_ERRORS: tuple[type[BaseException], ...] = (zlib.error, zstandard.ZstdError, OSError, EOFError, ValueError)
try:  # pragma: no branch
    import brotli as _brotli

    DECODE_ERRORS = (*DECODE_ERRORS, _brotli.error)
except ImportError:  # pragma: no cover
    pass
