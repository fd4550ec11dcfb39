"""A registry repository whose whole blobs are read through the model cache.

A lazy reader reads some blobs whole: the chunk table, a file no table covers, a tar layer.
Read straight from the registry, each is fetched again by every new reader; read through
here, each lands once in the cache's layout (verified, locked, as ``path`` fetches it:
:class:`.blobsource.CacheSource`) and every later reader, ``path`` included, takes it from there.
Byte ranges still go to the registry: their chunks are kept by the chunk store
(:mod:`.chunks`). Manifests, tags and referrers are the registry's answers, never the cache's.
Offline, :class:`CachedOnly` answers from the cache alone, for what it holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO, Protocol

from ocibridge.cache.blobsource import CacheSource, OfflineMiss
from ocibridge.cache.modelcache import ModelCache
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import ReadableStore, close_store, is_manifest
from ocibridge.stores.forwarding import ForwardingReads
from ocibridge.stores.ranged import RangedBlobSource, RangedPlan, RangeReader


class RangedStore(ReadableStore, RangedBlobSource, Protocol):
    """A store that reads blobs whole and in ranges (a registry repository)."""


class KeptBlobs(ForwardingReads[RangedStore]):
    """``remote`` with its whole-blob reads kept in (and answered from) the model cache."""

    def __init__(self, remote: RangedStore, cache: ModelCache | None = None,
                 checking: Callable[[str], None] | None = None):
        super().__init__(remote)
        self.remote = remote
        self._checking = checking  # told of each MiB of a blob the cache hashes (CacheSource)
        self.ranged_plan: RangedPlan = remote.ranged_plan  # how the registry is asked for ranges
        self._cache = cache or ModelCache()
        self._held: Descriptor | None = None  # the first manifest resolved: what the cache's source holds
        self._source: CacheSource | None = None

    def resolve(self, reference: str) -> Descriptor:
        desc = self.remote.resolve(reference)
        self._held = self._held or desc
        return desc

    def _cached(self, desc: Descriptor) -> CacheSource:
        if self._source is None:
            self._source = CacheSource(self._cache.blobs, self._cache.locks, self.remote, self._held or desc,
                                       checking=self._checking)
        return self._source

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        if is_manifest(desc):
            return self.remote.open_blob(desc)
        return self._cached(desc).open_blob(desc)

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        if is_manifest(desc):
            return self.remote.fetch_bytes(desc)
        return self._cached(desc).fetch_bytes(desc)

    def open_blob_range(self, desc: Descriptor, start: int, end: int | None = None, *,
                        probe: bool = False) -> RangeReader:
        return self.remote.open_blob_range(desc, start, end, probe=probe)

    def keep_for_offline(self, reference: str, desc: Descriptor) -> None:
        """``reference`` resolved to the manifest ``desc``: both kept (the record, the manifest's
        bytes), so an offline reader (:class:`CachedOnly`) finds the model again by that name."""
        self._cache._keep_manifest(self.remote, desc)  # noqa: SLF001  # the cache's own way, as path keeps it
        self._cache.remember(reference, desc)

    @property
    def fetched(self) -> list[str]:
        """Digests of the blobs fetched whole into the cache by this reader."""
        return [] if self._source is None else list(self._source.fetched)

    def close(self) -> None:
        close_store(self.remote)


class CachedOnly(ForwardingReads[CacheSource]):
    """The model manifest ``desc`` and what the model cache holds of it, with no registry
    (offline): a blob the cache lacks is :class:`.blobsource.OfflineMiss`, and so is a byte range
    (the chunk store answers the chunks it holds before a range is asked)."""

    def __init__(self, desc: Descriptor, cache: ModelCache | None = None):
        cache = cache or ModelCache()
        super().__init__(CacheSource(cache.blobs, cache.locks, None, desc))
        self.ranged_plan = RangedPlan()

    def open_blob_range(self, desc: Descriptor, start: int, end: int | None = None, *,
                        probe: bool = False) -> RangeReader:
        raise OfflineMiss(f"offline: bytes {start}-{end if end is not None else desc.size} of {desc.digest} "
                          "are not in the model cache")
