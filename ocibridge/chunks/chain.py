"""Which chunk table a lazy reader may trust for a resolved model manifest.

The chain starts at the manifest's digest. A table is trusted when (1) the manifest names the
table blob's digest in ``io.ocibridge.chunks.digest`` (the manifest digest binds it) and, when
the caller asks for signatures, a signature covering the manifest's annotations verified
(``trust_bound``: an OMS signature lists files, not annotations, so it vouches for no table),
or (2) a referrer holding it is signed by a key the caller trusts (``verify_referrer``). A
table found any other way is a registry's word and is not used: reads fall back to whole
blobs, each verified by the layer digest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ocibridge.chunks.chunktable import (
    ANNOTATION_DIGEST,
    ANNOTATION_SIZE,
    ARTIFACT_TYPE,
    MAX_TABLE_BYTES,
    TABLE_MEDIA_TYPE,
    ChunkTable,
    ChunkTableError,
    parse_table,
)
from ocibridge.errors import DigestMismatch, NotFound, OcibridgeError
from ocibridge.oci.digest import check_digest, verify_bytes
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.base import ReadableStore

#: raises when a referrer manifest is not signed by a trusted key (the signing package's check)
ReferrerCheck = Callable[[Descriptor], None]
#: raises when the table the manifest binds may not be trusted (no signature covering it)
BoundCheck = Callable[[], None]


@dataclass(frozen=True)
class Chain:
    """The trusted table (None: whole-blob reads) and, in words, why."""

    table: ChunkTable | None
    how: str


def bound_table_descriptor(manifest: Manifest) -> Descriptor | None:
    """The table blob the manifest's own annotations name, if any."""
    annotations = manifest.annotations or {}
    digest = annotations.get(ANNOTATION_DIGEST)
    if digest is None:
        return None
    try:
        size = int(annotations.get(ANNOTATION_SIZE, ""))
        check_digest(digest)
    except (ValueError, OcibridgeError):
        raise ChunkTableError(f"manifest annotation {ANNOTATION_DIGEST}/{ANNOTATION_SIZE} is malformed") from None
    if not 0 < size <= MAX_TABLE_BYTES:
        raise ChunkTableError(f"chunk table of {size} bytes: over the {MAX_TABLE_BYTES} byte limit")
    return Descriptor(mediaType=TABLE_MEDIA_TYPE, digest=digest, size=size)


def read_table_blob(store: ReadableStore, desc: Descriptor) -> ChunkTable:
    """The table blob, verified against its digest before it is parsed."""
    if desc.size > MAX_TABLE_BYTES:
        raise ChunkTableError(f"chunk table of {desc.size} bytes: over the {MAX_TABLE_BYTES} byte limit")
    try:
        with store.open_blob(desc) as reader:
            data = reader.read()
        verify_bytes(data, desc.digest, desc.size, what="chunk table")  # a read to its end is checked too
    except DigestMismatch as e:
        raise ChunkTableError(f"chunk table {desc.digest}: the registry served other bytes ({e}): "
                              "refused") from None
    return parse_table(data)


def find_chain(store: ReadableStore, subject: Descriptor, manifest: Manifest, *,
               verify_referrer: ReferrerCheck | None = None, trust_bound: BoundCheck | None = None) -> Chain:
    """The table to use for ``manifest`` (resolved as ``subject``); errors only for a table the
    manifest binds but the registry does not serve intact (a swapped table is refused, loudly)."""
    bound = bound_table_descriptor(manifest)
    if bound is not None and trust_bound is not None:
        try:
            trust_bound()
        except OcibridgeError as e:
            return Chain(None, f"the chunk table {bound.digest} the manifest binds is not used ({e})")
    if bound is not None:
        try:
            return Chain(read_table_blob(store, bound), f"chunk table {bound.digest} bound by the manifest")
        except NotFound:
            return Chain(None, f"the chunk table {bound.digest} the manifest names is not in the registry "
                               "(a copy without its referrers leaves it behind: copy with --referrers)")
    try:
        found = store.referrers(subject, ARTIFACT_TYPE)
    except OcibridgeError as e:
        return Chain(None, f"no chunk table (referrers unreadable: {e})")
    if not found:
        return Chain(None, "no chunk table for this manifest")
    if verify_referrer is None:
        return Chain(None, "a chunk table is attached but the manifest does not bind it "
                           "(--verify-key accepts a signed one)")
    reasons: list[str] = []
    for desc in found:
        try:
            verify_referrer(desc)
            return Chain(_referrer_table(store, subject, desc), f"chunk table in signed referrer {desc.digest}")
        except OcibridgeError as e:
            reasons.append(str(e))
    return Chain(None, f"no attached chunk table is signed by a trusted key: {'; '.join(reasons[:3])}")


def _referrer_table(store: ReadableStore, subject: Descriptor, desc: Descriptor) -> ChunkTable:
    parsed = parse_manifest_bytes(store.fetch_bytes(desc))  # verified by its digest
    if not isinstance(parsed, Manifest) or parsed.subject is None or parsed.subject.digest != subject.digest:
        raise ChunkTableError(f"referrer {desc.digest} is not a chunk table of {subject.digest}")
    tables = [layer for layer in parsed.layers if layer.mediaType == TABLE_MEDIA_TYPE]
    if len(tables) != 1:
        raise ChunkTableError(f"referrer {desc.digest} holds {len(tables)} chunk tables, not one")
    return read_table_blob(store, tables[0])
