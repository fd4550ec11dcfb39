"""What a model family module provides: how to recognise, read and write it.

A family is named on its kind's line in :mod:`.table` (which :mod:`.families` loads); detection,
``convert --to``, ``pull`` of any family and ``push --to`` all come from that table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ocibridge.oci.mediatypes import Family
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import Store

if TYPE_CHECKING:  # named in annotations only: detection (matches) loads no neutral form
    from ocibridge.kinds.neutral import Loss, ModelView, Written
    from ocibridge.places.targets import StoreTarget
    from ocibridge.transfer.copy import CopyStats
    from ocibridge.transfer.progress import ProgressFn


@dataclass
class WriteOptions:
    """Choices of the target family a conversion may need."""

    media_types: Family = Family.CNAI  # ModelPack naming to write
    overrides: dict[str, str] = field(default_factory=dict)  # descriptor/config fields set by flags


@dataclass
class Reading:
    """A family's artifact read into the neutral form, and the store serving its blobs (the
    source store itself, or a store made from it when the family is not OCI-shaped)."""

    view: ModelView
    blobs: Store
    losses: list[Loss] = field(default_factory=list)  # what reading alone dropped (never kept)


@dataclass
class Exported:
    """What an exporting family wrote: the root it tagged, the copy's counts, what it lost."""

    descriptor: Descriptor
    stats: CopyStats
    losses: list[Loss] = field(default_factory=list)
    keeps_source: bool = False  # the ModelPack form it was exported from is stored beside it


@runtime_checkable
class ModelFamily(Protocol):
    """A model family: recognised by its manifest, read into the neutral view."""

    name: str  # as --to spells it
    title: str  # for messages

    def matches(self, manifest: Manifest) -> bool:
        """Whether a manifest is of this family (by its media types alone)."""
        ...

    def key(self, manifest: Manifest | None, options: WriteOptions) -> str:
        """The round-trip key of a manifest (None: of what this family writes with ``options``)."""
        ...

    def read(self, store: Store, desc: Descriptor, data: bytes, manifest: Manifest) -> Reading:
        ...


@runtime_checkable
class Probes(Protocol):
    """A family some of whose artifacts only their content tells apart: a ModelCar image built by
    another tool is an ordinary image until its layers are looked at. Asked only about manifests
    no family claims by media type."""

    def probe(self, store: Store, desc: Descriptor, manifest: Manifest) -> bool:
        ...


@runtime_checkable
class Writes(Protocol):
    """A family written as one manifest + config over the same blobs (ModelPack, ModelKit, Docker)."""

    def write(self, view: ModelView, options: WriteOptions) -> Written:
        ...


@runtime_checkable
class Exports(Protocol):
    """A family written from the ModelPack form by its own exporter (Ollama, ModelCar images)."""

    def export(self, store: Store, desc: Descriptor, target: StoreTarget, *, concurrency: int,
               progress: ProgressFn | None) -> Exported:
        """Write the ModelPack artifact ``desc`` as this family at ``target`` (opened for
        writing); a failure leaves a store that can take back what it added as it was."""
        ...
