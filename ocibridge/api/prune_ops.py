"""``ocibridge prune`` (modctl ``prune``) as an API call: the blobs of a layout no listed
manifest uses, spared while a push may still be writing them.
"""

from __future__ import annotations

import time
from pathlib import Path

from ocibridge.api.store_ops import layout_store
from ocibridge.errors import OcibridgeError
from ocibridge.oci.models import Index, parse_manifest_bytes
from ocibridge.stores.base import MAX_MANIFEST_BYTES
from ocibridge.transfer.results import PruneResult

#: prune leaves unreferenced blobs younger than this: they may belong to a push still running.
DEFAULT_PRUNE_GRACE_SECONDS = 300.0


def prune(layout: str | None = None, *, dry_run: bool = False,
          grace_seconds: float = DEFAULT_PRUNE_GRACE_SECONDS) -> PruneResult:
    """Remove the blobs of a layout that no listed manifest uses (modctl ``prune``).

    Blobs modified less than ``grace_seconds`` ago are kept: another process may be pushing
    them and tag its artifact only at the end. The walk and the removal hold the index lock."""
    store = layout_store(layout)
    if store is None:
        return PruneResult((), 0, dry_run)
    now = time.time()
    removed: list[str] = []
    total = 0
    recent = 0
    with store.locked():
        candidates = store.unreferenced_blobs()
        spared = _used_by_recent_manifests(candidates, now - grace_seconds)
        for blob in candidates:
            try:
                st = blob.stat()
            except FileNotFoundError:
                continue
            if now - st.st_mtime < grace_seconds or f"{blob.parent.name}:{blob.name}" in spared:
                recent += 1
                continue
            if not dry_run:
                try:
                    blob.unlink()
                except FileNotFoundError:
                    continue
            removed.append(f"{blob.parent.name}:{blob.name}")
            total += st.st_size
    return PruneResult(tuple(removed), total, dry_run, recent)


def _used_by_recent_manifests(blobs: list[Path], since: float) -> set[str]:
    """Digests named by unreferenced manifests written or found present since ``since``: a push
    that found its manifest already here (a layout writer touches what it finds) tags it soon,
    so the blobs it names are spared with it."""
    spared: set[str] = set()
    pending = [b for b in blobs if _mtime(b) >= since]
    by_digest = {f"{b.parent.name}:{b.name}": b for b in blobs}
    while pending:
        blob = pending.pop()
        try:
            if blob.stat().st_size > MAX_MANIFEST_BYTES:
                continue
            node = parse_manifest_bytes(blob.read_bytes())
        except (OSError, OcibridgeError, ValueError):
            continue  # a layer or a config, not a manifest
        children = node.manifests if isinstance(node, Index) else [node.config, *node.layers]
        for child in children:
            if child.digest not in spared:
                spared.add(child.digest)
                if child.digest in by_digest:
                    pending.append(by_digest[child.digest])
    return spared


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
