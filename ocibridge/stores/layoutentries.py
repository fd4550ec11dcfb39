"""The entries of a layout's ``index.json``, as :mod:`.layout` writes them: one entry per
manifest, as oras-go writes it. Tagging drops the manifest's untagged entry, an untagged push of
a listed manifest changes nothing, and a manifest that loses its last tag stays listed untagged
(so it and its blobs remain reachable).
"""

from __future__ import annotations

from collections.abc import Sequence

from ocibridge.oci.mediatypes import ANNOTATION_REF_NAME
from ocibridge.oci.models import Descriptor


def listing(entries: Sequence[Descriptor], desc: Descriptor, tag: str | None) -> list[Descriptor] | None:
    """The entries once ``desc`` is listed (with ``tag``, the tag moved to it); None when it is
    listed already and no tag is given (nothing to write)."""
    kept: list[Descriptor] = []
    untagged: list[Descriptor] = []  # manifests the moved tag named before
    for entry in entries:
        ref = (entry.annotations or {}).get(ANNOTATION_REF_NAME)
        if tag is None and entry.digest == desc.digest:
            return None
        if tag is not None and ref == tag:
            if entry.digest != desc.digest:
                untagged.append(entry)
            continue
        if tag is not None and ref is None and entry.digest == desc.digest:
            continue  # replaced by the tagged entry
        kept.append(entry)
    for old in untagged:
        if not any(e.digest == old.digest for e in kept):
            kept.append(strip_ref_name(old))
    new = desc.model_copy(deep=True)
    annotations = {k: v for k, v in (new.annotations or {}).items() if k != ANNOTATION_REF_NAME}
    if tag is not None:
        annotations[ANNOTATION_REF_NAME] = tag
    new.annotations = annotations or None
    kept.append(new)
    return kept


def strip_ref_name(entry: Descriptor) -> Descriptor:
    """``entry`` without its tag (``org.opencontainers.image.ref.name``)."""
    annotations = {k: v for k, v in (entry.annotations or {}).items() if k != ANNOTATION_REF_NAME}
    return entry.model_copy(update={"annotations": annotations or None})
