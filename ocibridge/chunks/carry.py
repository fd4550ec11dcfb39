"""Carrying a bound chunk table to a model manifest made from another one (a conversion
between families, a mirror that re-labels media types).

The new manifest has another digest, so the source's binding cannot simply be reused: the
table is cut down to the layers that are still raw and byte-identical (same digest and size),
bound again by the new manifest's own annotations, and offered with a referrer whose subject
is the new manifest. Only a table the source manifest *binds* is carried: one found as an
unsigned referrer is a registry's word, and binding it would make it look trusted.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocibridge.chunks.attach import binding_annotations, referrer_manifest
from ocibridge.chunks.chain import bound_table_descriptor, read_table_blob
from ocibridge.chunks.chunktable import ANNOTATION_DIGEST, ANNOTATION_SIZE, ARTIFACT_TYPE, ChunkTable
from ocibridge.errors import NotFound
from ocibridge.oci.empty import EMPTY_DIGEST, EMPTY_JSON
from ocibridge.oci.layerinfo import is_raw
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import ReadableStore


@dataclass(frozen=True)
class SourceTable:
    """The table a source manifest binds (None: none to carry) and, in words, why not."""

    table: ChunkTable | None
    note: str = ""  # set when the manifest names a table that cannot be carried


def bound_source_table(store: ReadableStore, manifest: Manifest) -> SourceTable:
    """The table ``manifest`` binds, read from ``store`` and checked against the bound digest
    before it is parsed. A table served with other bytes (swapped, forged) raises
    :class:`~ocibridge.chunks.chunktable.ChunkTableError`: carrying it would bind a lie."""
    bound = bound_table_descriptor(manifest)
    if bound is None:
        return SourceTable(None)
    try:
        return SourceTable(read_table_blob(store, bound))
    except NotFound:
        return SourceTable(None, f"the chunk table {bound.digest} the source names is not in {store.describe()}")


def reduce_table(table: ChunkTable, layers: list[Descriptor]) -> ChunkTable:
    """The entries of ``table`` for ``layers`` that are raw files with the entry's digest and size."""
    kept = {}
    for layer in layers:
        entry = table.for_layer(layer)
        if entry is not None and is_raw(layer):
            kept[entry.digest] = entry
    return ChunkTable(table.chunk_size, kept, table.algorithm)  # a SHA-256 table stays one: same bytes


def without_binding(annotations: dict[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (annotations or {}).items() if k not in (ANNOTATION_DIGEST, ANNOTATION_SIZE)}


def rebind(manifest: Manifest, table: ChunkTable | None) -> Manifest:
    """``manifest`` with the binding annotations of ``table`` (none when it is None or empty)."""
    annotations = without_binding(manifest.annotations)
    if table is not None and table.layers:
        annotations.update(binding_annotations(table))
    return manifest.model_copy(update={"annotations": annotations or None})


def describe_reduction(source: ChunkTable, carried: ChunkTable | None) -> str | None:
    """What a reader loses, in words (None: every entry was carried)."""
    kept = len(carried.layers) if carried is not None else 0
    if kept == len(source.layers):
        return None
    if kept == 0:
        return (f"dropped ({len(source.layers)} layer(s) no longer raw files with the same digest): "
                "lazy reads fall back to whole-blob reads")
    return f"reduced to {kept} of {len(source.layers)} layer(s) (the others no longer raw files with the same digest)"


class ChunkReferrer:
    """The referrer that keeps a carried table's blob in the destination: a manifest held in
    memory, served with its two blobs by the store that converts (so the one copy writes it)."""

    def __init__(self, subject: Descriptor, table: ChunkTable):
        self.table = table
        subject = Descriptor(mediaType=subject.mediaType, digest=subject.digest, size=subject.size)
        self.body = referrer_manifest(subject, table)
        self.descriptor = Descriptor.for_bytes(OCI_MANIFEST, self.body, artifactType=ARTIFACT_TYPE)
        self.blobs = {table.descriptor().digest: table.to_bytes(), EMPTY_DIGEST: EMPTY_JSON}

    def bytes_of(self, digest: str) -> bytes | None:
        """The bytes of the referrer manifest or one of its blobs, by digest (None: not ours)."""
        if digest == self.descriptor.digest:
            return self.body
        return self.blobs.get(digest)

    def matches(self, artifact_type: str | None) -> bool:
        return artifact_type in (None, ARTIFACT_TYPE)
