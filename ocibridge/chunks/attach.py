"""Computing chunk tables (from a model's blobs, or from local files before a push) and
attaching one to a model manifest as a referrer, so registries keep the table blob."""

from __future__ import annotations

from ocibridge.chunks import hashes
from ocibridge.chunks.chunktable import (
    ARTIFACT_TYPE,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_THRESHOLD,
    ChunkTable,
    LayerChunks,
    binding_annotations,
    build_table,
    chunk_stream,
)
from ocibridge.errors import DigestMismatch
from ocibridge.oci.empty import empty_descriptor
from ocibridge.oci.layerinfo import is_raw
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import ReadableStore, WritableStore
from ocibridge.transfer.writer import Blob, write_artifact

__all__ = ["attach_table", "binding_annotations", "table_from_store"]


def table_from_store(store: ReadableStore, manifest: Manifest, *, chunk_size: int = DEFAULT_CHUNK_SIZE,
                     threshold: int = DEFAULT_THRESHOLD, algorithm: str = hashes.DEFAULT) -> ChunkTable:
    """Tables of the manifest's raw layers of ``threshold`` bytes or more, each read once and
    checked against its layer digest as it is chunked (chunk digests by ``algorithm``)."""
    entries: list[LayerChunks] = []
    for layer in manifest.layers:
        if layer.size < threshold or not is_raw(layer) or any(e.digest == layer.digest for e in entries):
            continue
        with store.open_blob(layer) as reader:
            entry = chunk_stream(reader, chunk_size, algorithm)
        if (entry.digest, entry.size) != (layer.digest, layer.size):
            raise DigestMismatch(f"{store.describe()}: {layer.digest} read as {entry.digest} ({entry.size} bytes)")
        entries.append(entry)
    return build_table(entries, chunk_size, algorithm)


def referrer_manifest(subject: Descriptor, table: ChunkTable) -> bytes:
    return table_referrer(subject, table.descriptor())[1]


def table_referrer(subject: Descriptor, table: Descriptor) -> tuple[Descriptor, bytes]:
    """The referrer manifest (descriptor, bytes) that keeps the table blob ``table`` beside
    ``subject``: known from the two digests alone, so whether a store holds it is one HEAD."""
    manifest = Manifest(mediaType=OCI_MANIFEST, artifactType=ARTIFACT_TYPE, config=empty_descriptor(),
                        layers=[table], subject=subject)
    body = manifest.to_json_bytes()
    return Descriptor.for_bytes(OCI_MANIFEST, body, artifactType=ARTIFACT_TYPE), body


def attach_table(store: WritableStore, subject: Descriptor, table: ChunkTable) -> Descriptor:
    """Push the table blob and a referrer manifest (``subject``: the model manifest) that keeps
    it; returns the referrer's descriptor. Blobs first, manifest last: nothing half-written."""
    blobs = [Blob.of_bytes(table.descriptor(), table.to_bytes()), Blob.empty()]
    body = referrer_manifest(subject, table)
    ref = Descriptor.for_bytes(OCI_MANIFEST, body, artifactType=ARTIFACT_TYPE)
    write_artifact(store, ref, body, blobs)
    return ref
