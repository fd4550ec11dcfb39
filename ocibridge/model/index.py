"""The one index -> model rule: which entry of an index is the model a reference names.

``k8s modelcar --index`` writes an index holding the ModelPack artifact and an image; ``skopeo
copy --all`` keeps such an index but drops the entries' ``artifactType``; ``convert`` may leave
several families side by side. Every reader that meets an index (pull, convert, modelcar,
inspect, validate) picks the entry here, so they all take the same one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ocibridge.oci.mediatypes import INDEX_TYPES, family_of_artifact
from ocibridge.oci.models import Descriptor, Index, Manifest, parse_manifest_bytes
from ocibridge.stores.base import MAX_MANIFEST_BYTES, ReadableStore

#: An index is searched for a model among at most this many entries (a multi-arch image index
#: is given up on after a bounded number of manifests).
MAX_INDEX_ENTRIES = 32

#: How much a manifest is the model sought: None for no model, lower for preferred.
Rank = Callable[[Manifest], "int | None"]


@dataclass(frozen=True)
class ModelEntry:
    desc: Descriptor
    data: bytes
    manifest: Manifest


def modelpack_rank(manifest: Manifest) -> int | None:
    """ModelPack (either family) is the model; anything else is not."""
    return 0 if family_of_artifact(manifest.artifactType, manifest.config.mediaType) else None


def modelpack_type_rank(artifact_type: str) -> int | None:
    return 0 if family_of_artifact(artifact_type, None) else None


def model_entry(store: ReadableStore, index: Index, rank: Rank = modelpack_rank,
                rank_type: Callable[[str], int | None] | None = modelpack_type_rank,
                others: list[Manifest] | None = None) -> ModelEntry | None:
    """The model entry of ``index``: the best-ranked (then first) of its first
    ``MAX_INDEX_ENTRIES`` manifest entries. Entries whose ``artifactType`` ``rank_type`` knows
    are taken at their word and only the best of them is read; when none carries one, every
    entry is read. Manifests read that are no model go to ``others``; None when none is."""
    entries = [e for e in index.manifests[:MAX_INDEX_ENTRIES]
               if e.mediaType not in INDEX_TYPES and e.size <= MAX_MANIFEST_BYTES]
    if rank_type is not None:
        typed = [(r, i, e) for i, e in enumerate(entries)
                 if e.artifactType and (r := rank_type(e.artifactType)) is not None]
        if typed:
            entries = [min(typed, key=lambda t: (t[0], t[1]))[2]]
    best: tuple[int, int, ModelEntry] | None = None
    for i, entry in enumerate(entries):
        data = store.fetch_bytes(entry)
        node = parse_manifest_bytes(data, entry.mediaType)
        if not isinstance(node, Manifest):
            continue
        r = rank(node)
        if r is None:
            if others is not None:
                others.append(node)
        elif best is None or (r, i) < best[:2]:
            best = (r, i, ModelEntry(entry, data, node))
    return best[2] if best else None
