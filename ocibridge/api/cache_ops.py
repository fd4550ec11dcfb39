"""The shared model cache: ``ocibridge.path`` (the local directory of a model), where the cache
is (``cache_dir``) and keeping it in bounds (``prune_cache``).

Its own module so the ``path`` command loads neither push's nor pull's modules: a model the
cache holds is answered after one manifest request, and start-up is most of what is left. So
this module imports at its top only what that warm answer needs (the locator, the cache's
records); the registry client, the cache's blob store and the options come when used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.core.textlists import one_or_many
from ocibridge.errors import OcibridgeError, UsageError
from ocibridge.kinds.hf.locator import HubReference, as_hub_reference
from ocibridge.places.locate import Locator, Role, locate, text_of
from ocibridge.stores.opened import closes_its_stores

if TYPE_CHECKING:
    from ocibridge.api.options import TransferOptions
    from ocibridge.api.policy import Verification
    from ocibridge.cache.modelcache import ModelCache
    from ocibridge.chunks.delta import DeltaResult
    from ocibridge.transfer.progress_events import ProgressFn


@closes_its_stores
def path(
    ref: str | Locator,
    *,
    transfer: TransferOptions | None = None,
    verify: Verification | None = None,
    include: str | Sequence[str] = (),
    exclude: str | Sequence[str] = (),
    offline: bool | None = None,
    hf: str | HubReference | None = None,
    progress: ProgressFn | None = None,
    on_delta: Callable[[DeltaResult], None] | None = None,
) -> Path:
    """The local directory of ``ref``'s files, in the shared model cache (``$OCIBRIDGE_CACHE/models``):
    only the blobs the cache lacks are fetched; read-only, shared with every other caller.
    ``offline`` (default ``$OCIBRIDGE_OFFLINE``) contacts nothing: ``ref`` means what it last
    resolved to. The containers policy file that applies, and ``verify`` (keys) when given,
    must accept the digest, which is then what is used (checked online: never from the cache alone).
    Online, a registry that cannot be reached (refused, no such host, timed out) while the cache
    holds the complete snapshot ``ref`` last resolved to gives that snapshot, with one warning
    (a notice) dating that resolution; an answer (401, 403, 404) never does, nor an incomplete
    snapshot, nor a check asked for (keys, a policy file that is not accept-anything).
    ``hf`` (``ORG/NAME``): the model is also laid out in the Hugging Face cache under that repo id,
    from the same blobs (hard links). ``progress``: the events of each blob fetched or found
    (transfer/progress.py). A layer whose chunk table shares chunks with blobs the cache holds
    (an earlier version) is a delta: those chunks are read locally, each re-hashed, and only
    the others fetched; ``on_delta`` hears what each such layer reused (docs/lazy.md). A layer a
    lazy read, a mount or serve kept whole under the content key of the chunk table the manifest
    binds is hashed and linked from there: no fetch, no second copy (docs/using.md).

    Without ``transfer``, ``verify`` and ``hf`` (and no policy file asking for a check), a snapshot
    the cache holds is answered from its records alone: one ``HEAD`` for a tag, nothing for a
    digest or offline, before the registry client is even imported."""
    from ocibridge.cache.records import offline_from_env

    located = locate(ref, Role.MODEL)  # once, here
    shown = text_of(located)
    include, exclude = one_or_many(include), one_or_many(exclude)  # a glob alone: one glob
    offline = offline_from_env() if offline is None else offline
    from ocibridge.signing.use import needs_checking, refuse_before_opening

    refuse_before_opening(located, verify, shown)
    checking = needs_checking(located, verify)
    if transfer is None and not checking and hf is None:  # the cache may answer alone
        from ocibridge.cache.fastpath import warm_path

        warm = warm_path(located, offline=offline, include=include, exclude=exclude)
        if warm is not None:
            return warm
    from ocibridge.cache.modelcache import ModelCache

    hub = None if hf is None else as_hub_reference(hf)  # before a fetch
    cache = ModelCache()
    if offline:
        if checking:
            raise UsageError(f"{shown}: the policy (--verify-key or the policy file) needs the registry: "
                             "it cannot be checked offline")
        from ocibridge.cache.blobsource import NeverFetched

        try:
            snap = cache.snapshot(None, shown, shown=shown, include=include, exclude=exclude)
        except NeverFetched as e:  # (what to do: offline reads only what an online fetch kept)
            raise NeverFetched(f"{e}: run 'ocibridge path' on it once online first") from None
    else:
        from ocibridge.api.opening import open_read, verified_digest
        from ocibridge.api.options import TransferOptions

        transfer = transfer or TransferOptions()
        try:
            source = open_read(located, transfer)
            reference = source.reference
            if checking:
                reference = verified_digest(source, verify, shown, located, files_only=True)  # a snapshot of files
            snap = cache.snapshot(source.store, reference, shown=shown, include=include, exclude=exclude,
                                  concurrency=transfer.concurrency, origin=_direct_origin(located, source.store),
                                  progress=progress)
        except OcibridgeError as e:
            if checking or not _cached_through_outage(cache, e, shown, include, exclude):
                raise
            snap = cache.snapshot(None, shown, shown=shown, include=include, exclude=exclude)
    if on_delta is not None:
        for done in snap.deltas:
            on_delta(done)
    if hub is not None:
        from ocibridge.kinds.hf.kind import into_hub_cache

        into_hub_cache(cache, snap, hub)
    return snap.path


def _cached_through_outage(cache: ModelCache, error: OcibridgeError, shown: str,
                           include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Whether ``path`` answers from the cache although the registry could not be asked:
    only when it could not be reached at all (refused, no such host, timed out; never an
    answer such as 401, 403 or 404) and the cache holds the complete snapshot ``shown`` last
    resolved to. Then it says so, in one warning line dated by that resolution."""
    import time

    from ocibridge.cache.records import complete_snapshot, read_record, resolved_at, snapshot_name
    from ocibridge.core import notices
    from ocibridge.stores.registry.unreachable import is_outage

    if not is_outage(error):
        return False
    try:
        record = read_record(cache.root, shown)
    except (ValueError, OSError):
        return False
    if record is None or complete_snapshot(cache.root, snapshot_name(record.digest, include, exclude)) is None:
        return False
    stamp = resolved_at(cache.root, shown)
    when = "at an unknown time" if stamp is None else time.strftime("at %Y-%m-%d %H:%M:%S UTC", time.gmtime(stamp))
    notices.say(f"warning: {error}; using {shown} as last resolved {when} ({record.digest}) from the model cache")
    return True


def _direct_origin(located: Locator, store: object) -> tuple[str, str] | None:
    """(host, repository) when ``store`` is the registry repository ``located`` names, asked
    directly (not a mirror, not a local store name): then a warm ``path`` of a tag may check
    it with one request (:mod:`ocibridge.cache.fastpath`)."""
    from ocibridge.oci.reference import RegistryReference
    from ocibridge.stores.base import RegistryRepository

    if not isinstance(located, RegistryReference) or not isinstance(store, RegistryRepository):
        return None
    host, repository = store.host, store.repository
    return (host, repository) if (located.registry, located.repository) == (host, repository) else None


def cache_dir() -> Path:
    """Where the shared model cache is (``$OCIBRIDGE_CACHE/models``), made if it is not there yet."""
    from ocibridge.cache.modelcache import ModelCache

    return ModelCache().root


@dataclass(frozen=True)
class CachePruneResult:
    """What :func:`prune_cache` removed (``snapshots``: their names), and what the cache takes after."""

    snapshots: tuple[str, ...]
    blobs: int
    chunks: int  # verified chunks of lazy reads
    tables: int  # chunk-index files of blobs no longer cached
    freed: int  # bytes given back to the file system
    size: int  # bytes the cache takes now, the pull cache's included
    pulls: int = 0  # leftovers of failed pulls removed from the pull cache (blobs, partial downloads)
    pulls_freed: int = 0  # their bytes
    pulls_held: int = 0  # leftovers due to go that a running pull holds: they stay

    def as_dict(self) -> dict[str, Any]:
        return {"snapshots": list(self.snapshots), "blobs": self.blobs, "chunks": self.chunks,
                "tables": self.tables, "freed": self.freed, "size": self.size,
                "pulls": {"removed": self.pulls, "freed": self.pulls_freed, "held": self.pulls_held}}


def prune_cache(*, older_than: float | None = None, max_size: int | None = None) -> CachePruneResult:
    """Keep the shared model cache in bounds: snapshots (and chunks of lazy reads) unused for
    ``older_than`` seconds go, then the least recently used until the cache takes at most
    ``max_size`` bytes, and every blob no remaining snapshot uses. A build in progress is waited
    for, never cut short. What failed or stopped pulls left in the pull cache (``pulls/``: blobs,
    partial downloads) goes by the same age, counts in the size and goes first for it; what a
    running pull holds stays. At least one of the two bounds is needed."""
    if older_than is None and max_size is None:
        raise UsageError("prune_cache needs older_than (seconds) and/or max_size (bytes)")
    from ocibridge.cache.modelcache import ModelCache
    from ocibridge.cache.prune import prune
    from ocibridge.transfer.pullcache import pull_cache_dir

    done = prune(ModelCache(), older_than=older_than, max_size=max_size, pulls=pull_cache_dir())
    return CachePruneResult(tuple(done.snapshots), done.blobs, done.chunks, done.tables, done.freed, done.size,
                            done.pulls, done.pulls_freed, done.pulls_held)
