"""Response bodies read into memory, bounded.

Blobs and manifests stream with their own limits; everything else a registry or token server
answers (tag lists, error bodies, token answers, referrers indexes, catalogs) is read whole, so
each is capped here, after decoding: a small gzip answer must not inflate into gigabytes.
"""

from __future__ import annotations

import os

import httpx

from ...errors import RegistryError

ENV_MAX_BODY = "OCIBRIDGE_MAX_RESPONSE_BYTES"
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
        for chunk in response.iter_bytes():
            total += len(chunk)
            if total > cap:
                raise RegistryError(
                    f"{what}: answer larger than {cap} bytes, refused (raise ${ENV_MAX_BODY} if it is genuine)")
            chunks.append(chunk)
    finally:
        response.close()
    data = b"".join(chunks)
    response._content = data  # what Response.read() stores; .content/.json() read it from here
    return data
