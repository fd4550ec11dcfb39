"""``ocibridge path`` of a model the cache already holds, answered before the registry client
and the model modules are imported (they are most of what a warm answer cost).

Offline, the record of the reference names the manifest and its snapshot is there or not.
Online, a digest reference needs no request (the snapshot of a digest never changes); a tag
needs one, to learn whether it still names what it named (:mod:`..stores.registry.quickhead`).
Whenever this cannot answer for certain it returns None and the full resolution runs, with
the same result it always had: nothing here is a second way of being right.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ocibridge.cache.records import complete_snapshot, mark_resolved, model_cache_root, read_record, snapshot_name
from ocibridge.oci.reference import RegistryReference, Written


def warm_path(ref: Written, *, offline: bool, include: Sequence[str] = (),
              exclude: Sequence[str] = ()) -> Path | None:
    """The snapshot directory of ``ref`` (located: places/locate.py) if the cache can answer
    now, else None."""
    root = model_cache_root()
    try:
        record = read_record(root, ref.text)
    except (ValueError, OSError):
        return None  # the full resolution says what is wrong with it
    if record is None:
        return None
    if not offline:
        origin = record.origin
        if origin is None or not isinstance(ref, RegistryReference):
            return None  # only a registry reference is checked by one HEAD
        if ref.digest is None:
            from ocibridge.stores.registry.quickhead import head_digest

            if head_digest(origin.host, origin.repository, origin.reference) != origin.top:
                return None  # moved, or only the full client can tell: it resolves again
            mark_resolved(root, ref.text)  # what an outage's warning will date
    return complete_snapshot(root, snapshot_name(record.digest, include, exclude))
