"""A read-only store serving one converted artifact: its new manifest and config from memory,
every layer from the source store, untouched. The one graph copy moves it like any artifact,
so blobs the destination holds are skipped and blobs in its registry are mounted. A chunk
table carried from the source (chunks/carry.py) is served as the new manifest's one referrer,
so a copy that takes referrers writes the table blob and the referrer that keeps it."""

from __future__ import annotations

import io
from typing import BinaryIO

from ocibridge.chunks.carry import ChunkReferrer
from ocibridge.errors import NotFound
from ocibridge.kinds.neutral import Written
from ocibridge.oci.empty import EMPTY_JSON, is_empty_layer
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.base import Store

TAG = "converted"


class ConvertedStore:
    def __init__(self, inner: Store, written: Written, chunks: ChunkReferrer | None = None):
        self.inner = inner
        self.written = written
        self.chunks = chunks  # the carried chunk table's referrer (subject: this manifest)
        self.descriptor = Descriptor.for_bytes(written.media_type, written.manifest)
        if written.artifact_type:
            self.descriptor.artifactType = written.artifact_type
        manifest = parse_manifest_bytes(written.manifest, written.media_type)
        assert isinstance(manifest, Manifest)
        self.manifest = manifest
        self.config = manifest.config

    def describe(self) -> str:
        return f"{self.inner.describe()} (converted)"

    def exists(self, desc: Descriptor) -> bool:
        if desc.digest in (self.descriptor.digest, self.config.digest) or self._held_bytes(desc) is not None:
            return True
        return self.inner.exists(desc)

    def _held_bytes(self, desc: Descriptor) -> bytes | None:
        """Bytes this view holds itself: the carried chunk table, or the empty descriptor's ``{}``
        (the one layer of a model of no files, which a source of another family never stored)."""
        if is_empty_layer(desc):
            return EMPTY_JSON
        return self.chunks.bytes_of(desc.digest) if self.chunks is not None else None

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        if desc.digest == self.descriptor.digest:
            return self.written.manifest
        if desc.digest == self.config.digest:
            return self.written.config
        held = self._held_bytes(desc)
        return held if held is not None else self.inner.fetch_bytes(desc)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        if desc.digest in (self.descriptor.digest, self.config.digest) or self._held_bytes(desc) is not None:
            return io.BytesIO(self.fetch_bytes(desc))
        return self.inner.open_blob(desc)

    def resolve(self, reference: str) -> Descriptor:
        if reference in (TAG, self.descriptor.digest):
            return self.descriptor
        raise NotFound(f"{self.describe()} has no reference {reference}")

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        # a signature of the source names the source's digest, not this one; a carried chunk
        # table's referrer is made for this manifest
        chunks = self.chunks
        if chunks is not None and desc.digest == self.descriptor.digest and chunks.matches(artifact_type):
            return [chunks.descriptor]
        return []

    def tags(self) -> list[str]:
        return [TAG]
