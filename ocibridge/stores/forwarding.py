"""The reads of a store that wraps another store, written once: a wrapper (the Ollama guard in
front of a registry, the pull cache in front of a source) overrides only what it changes, and
every other read is the wrapped store's own."""

from __future__ import annotations

from typing import TYPE_CHECKING, BinaryIO, Generic, TypeVar

from ocibridge.stores.base import Store

if TYPE_CHECKING:
    from ocibridge.oci.models import Descriptor

Inner = TypeVar("Inner", bound=Store)


class ForwardingReads(Generic[Inner]):
    """Each read of the store's protocol, handed to ``inner``."""

    def __init__(self, inner: Inner) -> None:
        self._inner = inner

    def describe(self) -> str:
        return self._inner.describe()

    def exists(self, desc: Descriptor) -> bool:
        return self._inner.exists(desc)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        return self._inner.open_blob(desc)

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        return self._inner.fetch_bytes(desc)

    def resolve(self, reference: str) -> Descriptor:
        return self._inner.resolve(reference)

    def tags(self) -> list[str]:
        return self._inner.tags()

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        return self._inner.referrers(desc, artifact_type)
