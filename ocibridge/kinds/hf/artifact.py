"""``hf:ORG/NAME[@REVISION]`` where a command reads a store (``copy``, ``convert``): the model
of the local Hugging Face cache as the artifact ``push`` would build of it.

The artifact is a read-only store that builds itself on first read (the push's own
:class:`~ocibridge.model.builder.PlannedArtifact`), so a copy or a conversion of it is the
same artifact, with the same ``image.source``/``image.revision`` annotations, that
``push hf:…`` stores; nothing is written before the whole snapshot has been read.
"""

from __future__ import annotations

from ocibridge.kinds.hf.hubcache import SCHEME
from ocibridge.stores.base import Store


def is_hub_reference(text: str) -> bool:
    return text.startswith(SCHEME)


def hub_artifact(reference: str) -> tuple[Store, str]:
    """(store, reference within it) of ``hf:ORG/NAME[@REVISION]``; one error line for a repo
    or revision the cache lacks."""
    from ocibridge.kinds.hf.door import read_snapshot
    from ocibridge.kinds.source import ReadRequest
    from ocibridge.model.builder import ARTIFACT_TAG, PlannedArtifact

    return PlannedArtifact(read_snapshot(reference, ReadRequest())), ARTIFACT_TAG
