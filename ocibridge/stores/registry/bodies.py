"""Response bodies read into memory, bounded.

Blobs and manifests stream with their own limits; everything else a registry or token server
answers (tag lists, error bodies, token answers, referrers indexes, catalogs) is read whole, so
each is capped here, after decoding: a small gzip answer must not inflate into gigabytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx

from ocibridge.core.environment import MAX_RESPONSE_BYTES as ENV_MAX_BODY
from ocibridge.core.httpx_wall import keep_body
from ocibridge.errors import RegistryError
from ocibridge.oci.digest import CHUNK

DEFAULT_MAX_BODY = 16 * 1024 * 1024  # a tag page of 10,000 long tags is ~1 MiB


def max_body_bytes() -> int:
    """The cap, raised or lowered with ``$OCIBRIDGE_MAX_RESPONSE_BYTES``."""
    value = os.environ.get(ENV_MAX_BODY, "").strip()
    return int(value) if value.isascii() and value.isdigit() and int(value) > 0 else DEFAULT_MAX_BODY


def read_bounded(response: httpx.Response, what: str, limit: int | None = None) -> bytes:
    """Read ``response`` (opened with ``stream=True``) to its end, refusing more than ``limit``
    decoded bytes; afterwards ``response.content`` and ``response.json()`` work as usual."""
    cap = max_body_bytes() if limit is None else limit
    chunks: list[bytes] = []
    total = 0
    try:
        for chunk in decoded_chunks(response):
            total += len(chunk)
            if total > cap:
                raise RegistryError(
                    f"{what}: answer larger than {cap} bytes, refused (raise ${ENV_MAX_BODY} if it is genuine)")
            chunks.append(chunk)
    finally:
        response.close()
    data = b"".join(chunks)
    keep_body(response, data)
    return data


#: How much of a body ocibridge reads when it only wants the reason for a refusal (an error
#: answer, a redirect, a retried 503): the message shown is cut far shorter than this anyway.
ERROR_BODY_BYTES = 64 * 1024


def read_prefix(response: httpx.Response, limit: int = ERROR_BODY_BYTES) -> bytes:
    """Read at most ``limit`` decoded bytes of ``response`` (opened with ``stream=True``), then
    close it; the rest is never downloaded nor decoded, so a gzip bomb behind a 404 stays small.
    Afterwards ``response.content`` holds the prefix, for the error message."""
    if response.is_stream_consumed:  # read already (a layer that looked at a 401 first): what it kept
        try:
            return response.content[:limit]
        except httpx.ResponseNotRead:
            return b""
    chunks: list[bytes] = []
    total = 0
    try:
        for chunk in decoded_chunks(response, min(CHUNK, limit)):
            chunks.append(chunk[: limit - total])
            total += len(chunks[-1])
            if total >= limit:
                break
    except httpx.HTTPError:
        pass  # a body that does not decode: the status alone says what happened
    finally:
        response.close()
    data = b"".join(chunks)
    keep_body(response, data)
    return data


class _RawBody:
    """The bytes of a streamed response as they came over the wire (no decoding by httpx)."""

    def __init__(self, response: httpx.Response):
        self._chunks = response.iter_raw()
        self._buffer = b""

    def read(self, n: int = -1) -> bytes:
        while not self._buffer:
            chunk = next(self._chunks, None)
            if chunk is None:
                return b""
            self._buffer = chunk
        size = len(self._buffer) if n is None or n < 0 else n
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data


def decoded_chunks(response: httpx.Response, piece: int = CHUNK) -> Iterator[bytes]:
    """The decoded body in pieces of at most ``piece`` bytes. httpx decodes a whole network
    chunk per call, so a gzip inside a gzip turns kilobytes into gigabytes at once; the bounded
    decoders used for LINKS downloads never hand out more than asked, whatever the stacking."""
    header = response.headers.get("content-encoding", "").strip()
    if not header or header.lower() == "identity":
        # the usual answer: no decoders (zstandard, brotli: ~20 ms at start)
        raw = _RawBody(response)
        while data := raw.read(piece):
            yield data
        return
    from ocibridge.core.httpencodings import DECODE_ERRORS, DECODERS, decoding_reader

    codings = [c.strip().lower() for c in header.split(",")]
    known = ", ".join(c for c in codings if c in DECODERS)  # like httpx: an unknown label is no coding
    # ImportError: br without brotli installed
    failures: tuple[type[BaseException], ...] = (*DECODE_ERRORS, ImportError)
    try:
        reader = decoding_reader(_RawBody(response), known)
        while True:
            data = reader.read(piece)
            if not data:
                return
            yield data
    except failures as e:
        raise httpx.DecodingError(f"answer body does not decode: {e}") from None
