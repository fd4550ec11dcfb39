"""``hf:ORG/NAME[@REVISION]`` where a command reads a store (``copy``, ``convert``): the model
of the local Hugging Face cache as the artifact ``push`` would build of it.

The artifact is a read-only store that builds itself on first read (the push's own
:class:`~ocibridge.model.builder.PlannedArtifact`), so a copy or a conversion of it is the
same artifact, with the same ``image.source``/``image.revision`` annotations and the same
chunk table bound (push's policy, its default unless the command was given push's
``--no-chunks``/``--chunk-threshold``/``--chunk-hash``: :func:`hub_artifact`), that ``push hf:…`` stores;
nothing is written before the whole snapshot has been read. A copy writes it as push does
(:func:`ocibridge.model.deliver.deliver`: the table's referrer attached), a conversion carries
the table it binds (kinds/chunks.py), a mirror job attaches it after its copy (mirror/run.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocibridge.kinds.hf.locator import HubReference

if TYPE_CHECKING:
    from ocibridge.chunks.choice import ChunkChoice
    from ocibridge.model.builder import PlannedArtifact
    from ocibridge.model.package import ModelPackage
    from ocibridge.stores.registry.options import RegistryOptions
    from ocibridge.stores.target import SourceTarget


def open_hub_target(ref: HubReference, *, for_write: bool = False,
                    options: RegistryOptions | None = None, chunks: ChunkChoice | None = None) -> SourceTarget:
    """The hf kind's opener: the artifact a push of ``hf:ORG/NAME[@REVISION]`` builds (with
    ``chunks``: push's chunk flags; None, its defaults), as a read-only store; one error line
    for a repo or revision the cache lacks. (``for_write`` and ``options``: the openers' one
    signature; the Hub cache is no store to write to.)"""
    if for_write:
        from ocibridge.errors import InvalidReference

        raise InvalidReference(f"{ref.text} is no store: push, copy and convert read it as a source")
    from ocibridge.kinds.hf.kind import read_snapshot
    from ocibridge.kinds.source import ReadRequest
    from ocibridge.model.builder import ARTIFACT_TAG
    from ocibridge.stores.target import SourceTarget

    if chunks is not None:
        chunks.policy()  # a value it refuses: one line before the snapshot is read
    return SourceTarget(hub_artifact(read_snapshot(ref, ReadRequest()), chunks), ARTIFACT_TAG, None, ref.text)


def hub_artifact(package: ModelPackage, chunks: ChunkChoice | None = None) -> PlannedArtifact:
    """What ``push`` builds of a Hub cache snapshot read as ``package``: its default build and
    the chunk policy ``chunks`` says, push's default when None (a table of each raw file from
    ``PUSH_THRESHOLD``, bound by the manifest), so ``copy``, ``convert`` and a mirror job give
    the manifest digest push gives with the same chunk settings."""
    from ocibridge.chunks.choice import ChunkChoice
    from ocibridge.model.builder import BuildOptions, PlannedArtifact

    return PlannedArtifact(package, BuildOptions(), (chunks or ChunkChoice()).policy())
