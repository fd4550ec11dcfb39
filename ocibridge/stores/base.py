"""The store protocol every place of content implements, so one copy moves between any two.

A store is bound to one repository (a layout directory, a registry repository, an Ollama
model). References passed to it are a tag or a digest.
"""

from __future__ import annotations

from typing import BinaryIO, Protocol, runtime_checkable

from ..oci.mediatypes import ALL_MANIFEST_TYPES
from ..oci.models import Descriptor

#: Manifests and configs are small; anything larger is refused rather than read into memory.
MAX_MANIFEST_BYTES = 4 * 1024 * 1024


@runtime_checkable
class Store(Protocol):
    """exists / fetch (stream) / push (stream, verified) / resolve / tag / referrers."""

    def describe(self) -> str:
        """A human-readable name for messages, e.g. ``oci:/data/store``."""
        ...

    def exists(self, desc: Descriptor) -> bool:
        """Whether the store holds this blob or manifest (by digest)."""
        ...

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        """A reader of the content; reading to EOF raises DigestMismatch on bad content."""
        ...

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        """Small content (manifest, config), verified against the descriptor."""
        ...

    def push_blob(self, desc: Descriptor, reader: BinaryIO) -> None:
        """Store a blob from a stream; verifies digest and size before it becomes visible."""
        ...

    def push_manifest(self, desc: Descriptor, data: bytes, tag: str | None = None) -> None:
        """Store a manifest or index (verified), optionally tagging it."""
        ...

    def resolve(self, reference: str) -> Descriptor:
        """The descriptor of the manifest a tag or digest names; raises NotFound."""
        ...

    def tag(self, desc: Descriptor, tag: str) -> None:
        """Point ``tag`` at an existing manifest, replacing what it named before."""
        ...

    def tags(self) -> list[str]:
        ...

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        """Manifests whose ``subject`` is ``desc``."""
        ...


def is_manifest(desc: Descriptor) -> bool:
    return desc.mediaType in ALL_MANIFEST_TYPES


def can_ingest(store: object) -> bool:
    """Stores that accept a blob of unknown digest (hash while writing) offer ``ingest_blob``:
    ``ingest_blob(reader) -> (digest, size)``. Pushes use it to read each new file only once."""
    return callable(getattr(store, "ingest_blob", None))


@runtime_checkable
class BlobView(Protocol):
    """A store whose blobs are another store's, byte for byte (a re-labelling view): a registry
    can mount them from that store's repository instead of receiving them again."""

    def blob_source(self) -> Store: ...


def blob_origin(store: object) -> object:
    """The store that really holds ``store``'s blobs (through any number of views)."""
    while isinstance(store, BlobView):
        store = store.blob_source()
    return store


@runtime_checkable
class Mounting(Protocol):
    """A store that can take a blob by reference from another store of the same server
    (a registry's cross-repository mount) instead of receiving its bytes."""

    def can_mount_from(self, src: object) -> bool: ...

    def mount_from(self, desc: Descriptor, src: object) -> bool: ...
