"""What opening a located reference gives: a store and the tag or digest of the artifact in it.

Its own small module, below every opener (layouts and registries in :mod:`ocibridge.places.targets`,
a kind's own places in its package), so an opener needs no import of the dispatch that calls it."""

from __future__ import annotations

from dataclasses import dataclass

from ocibridge.stores.base import Store, WritableStore


@dataclass
class SourceTarget:
    """A place to read an artifact from, and the tag or digest of it there: a store, or a
    kind's own place that builds the artifact as a read-only store (``hf:ORG/NAME``)."""

    store: Store
    reference: str
    tag: str | None  # what to tag on write (None when pinned by digest only)
    text: str  # how the user wrote it, for messages


@dataclass
class StoreTarget(SourceTarget):
    """A store that takes writes plus the tag or digest within it."""

    store: WritableStore  # layouts, registries and Ollama stores all take writes
