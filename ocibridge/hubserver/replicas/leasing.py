"""Which lease a serve holds (:func:`lease_for`): the registry's for a registry prefix
(:mod:`.writerlease`), the layout's for a layout (:mod:`.layoutlease`), none otherwise. Apart from
:mod:`.lease`, so that the lease's kinds import what they share without importing each other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocibridge.hubserver.replicas.lease import Lease, this_process

if TYPE_CHECKING:
    from pathlib import Path

    from ocibridge.hubserver.replicas.leasetimes import LeaseTimes
    from ocibridge.hubserver.repo.sources import Source


def lease_for(source: Source | None, times: LeaseTimes, cache_dir: Path, url: str | None = None) -> Lease:
    """The lease of ``source`` (serve's first): a registry prefix's in the registry, a layout's
    (``oci:DIR``, the local store) in the layout; ``cache_dir``: where this process's id is kept
    (:mod:`.identity`); ``url``: where this serve is reached, until :meth:`Lease.start` says."""
    from ocibridge.hubserver.replicas.identity import holder_id
    from ocibridge.hubserver.repo.sources import LayoutSource, RegistrySource

    if isinstance(source, RegistrySource):
        from ocibridge.hubserver.replicas.writerlease import RegistryLease
        from ocibridge.oci.bookkeeping import LEASE_REPO, WRITER_TAG
        from ocibridge.stores.base import WritableStore

        repo = source.repository([LEASE_REPO])
        if repo is None or not isinstance(repo.store, WritableStore):
            return Lease()
        return RegistryLease(repo.store, f"{repo.shown}:{WRITER_TAG}", this_process(holder_id(cache_dir), url), times)
    if isinstance(source, LayoutSource):
        from ocibridge.hubserver.replicas.layoutlease import LayoutLease

        return LayoutLease(source.root, source.shown, this_process(holder_id(cache_dir), url), times)
    return Lease()
