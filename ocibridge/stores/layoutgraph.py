"""What a layout's ``index.json`` reaches: the digests its manifests use (what a failed push may
remove and ``prune`` may not keep), the blob files outside them, and the referrers of a manifest
(the layout keeps no referrers index: every listed manifest is read for its ``subject``).
Functions over the index's entries and a reader of their bytes, so :mod:`.layout` stays the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from ocibridge.core.fsutil import TEMP_PREFIX
from ocibridge.errors import OcibridgeError
from ocibridge.oci.models import Descriptor, Index, Manifest, parse_manifest_bytes
from ocibridge.stores.base import MAX_MANIFEST_BYTES, is_manifest

Fetch = Callable[[Descriptor], bytes]


def reachable(entries: Iterable[Descriptor], fetch: Fetch) -> set[str] | None:
    """Every digest reachable from ``entries`` (manifests, their configs and layers), or None
    when some manifest cannot be read."""
    used: set[str] = set()
    pending = list(entries)
    while pending:
        desc = pending.pop()
        if desc.digest in used:
            continue
        used.add(desc.digest)
        if not is_manifest(desc):
            continue
        try:
            node = parse_manifest_bytes(fetch(desc), desc.mediaType)
        except OcibridgeError:
            return None
        if isinstance(node, Index):
            pending.extend(node.manifests)
        else:
            pending.extend([node.config, *node.layers])
    return used


def blobs_outside(blobs: Path, used: set[str]) -> list[Path]:
    """The blob files under ``blobs/<alg>/`` whose digest is not in ``used`` (temporary files excluded)."""
    found = []
    for algorithm_dir in sorted(blobs.iterdir()):
        if not algorithm_dir.is_dir():
            continue
        for blob in sorted(algorithm_dir.iterdir()):
            if blob.name.startswith(TEMP_PREFIX) or not blob.is_file():
                continue
            if f"{algorithm_dir.name}:{blob.name}" not in used:
                found.append(blob)
    return found


def referrers_in(entries: Iterable[Descriptor], fetch: Fetch, desc: Descriptor,
                 artifact_type: str | None = None) -> list[Descriptor]:
    """The listed manifests whose ``subject`` is ``desc`` (of ``artifact_type`` when given)."""
    found: list[Descriptor] = []
    seen: set[str] = set()
    for entry in entries:
        if entry.digest in seen or entry.size > MAX_MANIFEST_BYTES:
            continue
        seen.add(entry.digest)
        try:
            manifest = parse_manifest_bytes(fetch(entry))
        except OcibridgeError:
            continue
        if manifest.subject is None or manifest.subject.digest != desc.digest:
            continue
        kind = manifest.artifactType or (manifest.config.mediaType if isinstance(manifest, Manifest) else None)
        if artifact_type and kind != artifact_type:
            continue
        found.append(Descriptor(mediaType=entry.mediaType, digest=entry.digest, size=entry.size,
                                artifactType=kind, annotations=manifest.annotations))
    return found
