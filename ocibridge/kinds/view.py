"""A read-only store serving one converted artifact: its new manifest and config from memory,
every layer from the source store, untouched. The one graph copy moves it like any artifact,
so blobs the destination holds are skipped and blobs in its registry are mounted."""

from __future__ import annotations

import io
from typing import BinaryIO

from ocibridge.errors import NotFound
from ocibridge.kinds.neutral import Written
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.base import Store

TAG = "converted"


class ConvertedStore:
    def __init__(self, inner: Store, written: Written):
        self.inner = inner
        self.written = written
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
        if desc.digest in (self.descriptor.digest, self.config.digest):
            return True
        return self.inner.exists(desc)

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        if desc.digest == self.descriptor.digest:
            return self.written.manifest
        if desc.digest == self.config.digest:
            return self.written.config
        return self.inner.fetch_bytes(desc)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        if desc.digest in (self.descriptor.digest, self.config.digest):
            return io.BytesIO(self.fetch_bytes(desc))
        return self.inner.open_blob(desc)

    def resolve(self, reference: str) -> Descriptor:
        if reference in (TAG, self.descriptor.digest):
            return self.descriptor
        raise NotFound(f"{self.describe()} has no reference {reference}")

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        return []  # a signature of the source names the source's digest, not this one

    def tags(self) -> list[str]:
        return [TAG]
