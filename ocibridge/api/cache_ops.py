"""``ocibridge.path``: the local directory of a model, from the shared model cache.

Its own module so the ``path`` command loads neither push's nor pull's modules: a model the
cache holds is answered after one manifest request, and start-up is most of what is left.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ocibridge.api.copy import TransferOptions
from ocibridge.errors import UsageError
from ocibridge.kinds.targets import closes_its_stores, open_store_target

if TYPE_CHECKING:
    from ocibridge.signing.verify import VerifyPolicy


@closes_its_stores
def path(
    ref: str,
    *,
    transfer: TransferOptions | None = None,
    verify: VerifyPolicy | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    offline: bool | None = None,
    hf: str | None = None,
) -> Path:
    """The local directory of ``ref``'s files, in the shared model cache (``$OCIBRIDGE_CACHE``):
    only the blobs the cache lacks are fetched; read-only, shared with every other caller.
    ``offline`` (default ``$OCIBRIDGE_OFFLINE``) contacts nothing: ``ref`` means what it last
    resolved to. With ``verify``, a signature of the digest must verify, and that digest is used.
    ``hf`` (``ORG/NAME``): the model is also laid out in the Hugging Face cache under that repo id,
    from the same blobs (hard links)."""
    from ocibridge.cache.models import ModelCache, offline_from_env

    offline = offline_from_env() if offline is None else offline
    hub_name = None if hf is None else hf if hf.startswith("hf:") else f"hf:{hf}"
    if hub_name is not None:
        from ocibridge.kinds.hf.hubcache import parse

        parse(hub_name)  # a malformed repo id fails before anything is fetched
    cache = ModelCache()
    if offline:
        if verify is not None:
            raise UsageError("--verify-key needs the registry: it cannot be checked offline")
        snap = cache.snapshot(None, ref, shown=ref, include=include, exclude=exclude)
    else:
        transfer = transfer or TransferOptions()
        source = open_store_target(ref, options=transfer.registry_options())
        reference = source.reference
        if verify is not None:
            from ocibridge.api.copy import verified_digest

            reference = verified_digest(source, verify, ref)
        snap = cache.snapshot(source.store, reference, shown=ref, include=include, exclude=exclude,
                              concurrency=transfer.concurrency)
    if hub_name is not None:
        from ocibridge.kinds.hf.door import into_hub_cache

        into_hub_cache(cache, snap, hub_name)
    return snap.path
