"""A manifest as a registry answers it: its body read within the cap, and its descriptor and
parse, with where its blobs live learnt from that one parse."""

from __future__ import annotations

import httpx

from ocibridge.errors import OcibridgeError, TooLarge
from ocibridge.oci.mediatypes import ALL_MANIFEST_TYPES, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Index, Manifest, parse_manifest_bytes
from ocibridge.stores.base import MAX_MANIFEST_BYTES
from ocibridge.stores.registry.blobhomes import remember_blobs_of
from ocibridge.stores.registry.bodies import decoded_chunks

#: the Accept list of a manifest request: every manifest type this project reads
ACCEPT_MANIFESTS = ", ".join(ALL_MANIFEST_TYPES)


def media_type_of(value: str | None) -> str:
    """A Content-Type header's media type, without its parameters."""
    return (value or "").split(";", 1)[0].strip()


def capped_body(response: httpx.Response, too_large: str) -> bytes:
    """The body of a manifest answer, decoded within bounds (even gzip in gzip); ``too_large``
    is the error past :data:`.base.MAX_MANIFEST_BYTES`."""
    parts, total = [], 0
    for chunk in decoded_chunks(response):
        total += len(chunk)
        if total > MAX_MANIFEST_BYTES:
            raise TooLarge(too_large)
        parts.append(chunk)
    return b"".join(parts)


def described(base: str, repository: str, digest: str, data: bytes, content_type: str | None, *,
              on_disk: bool = True) -> tuple[Descriptor, Manifest | Index | None]:
    """A fetched manifest's descriptor (its media type from the answer, else from its bytes),
    and where its blobs live, learnt from one parse (None when the bytes are no manifest of the
    type named: the caller's own parse says so); ``on_disk``: as :func:`remember_blobs_of`."""
    media_type = media_type_of(content_type)
    named = media_type if media_type in ALL_MANIFEST_TYPES else None
    try:
        node: Manifest | Index | None = parse_manifest_bytes(data, named)
    except OcibridgeError:
        if named is None:
            raise  # no type named and none readable from the bytes
        node = None
    media_type = named or (node.mediaType if node is not None else None) or OCI_MANIFEST
    if node is not None:
        remember_blobs_of(base, repository, node, on_disk=on_disk)
    return Descriptor(mediaType=media_type, digest=digest, size=len(data)), node
