"""``convert``: an artifact of any family becomes another family, blobs reused byte for byte.

The source is identified by what it is (:func:`.registry.identify`), read into the neutral
view, written as the target family (or given back exactly, when it carries the target's
origin), and moved by the one graph copy from a :class:`.view.ConvertedStore`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..copy import DEFAULT_CONCURRENCY, CopyStats, copy
from ..errors import NotFound, OcibridgeError
from ..oci.models import Descriptor
from ..progress import ProgressFn
from ..stores.base import Store
from ..targets import open_store_target
from .base import Exports, Reading, WriteOptions, Writes
from .model import Loss, ModelView, Written
from .origin import restore
from .registry import Identified, by_name, identify
from .table import OVERRIDES
from .view import TAG, ConvertedStore


@dataclass
class Conversion:
    """A converted artifact ready to copy, and what the conversion found and lost."""

    store: ConvertedStore
    source: Identified
    source_family: str
    target_family: str
    restored: bool
    losses: list[Loss] = field(default_factory=list)

    @property
    def descriptor(self) -> Descriptor:
        return self.store.descriptor


def apply_overrides(view: ModelView, overrides: dict[str, str]) -> None:
    """Set descriptor/config fields from flags (``--arch`` → config.architecture, ...)."""
    for flag, value in overrides.items():
        section, name = OVERRIDES[flag]
        target = view.descriptor if section == "descriptor" else view.config
        target[name] = [value] if name == "licenses" else value
    if overrides:
        view.edited = True


def convert_artifact(store: Store, reference: str, to: str, options: WriteOptions | None = None) -> Conversion:
    """The artifact ``reference`` names in ``store``, as family ``to`` (nothing is written)."""
    options = options or WriteOptions()
    found = identify(store, reference)
    reading = found.family.read(store, found.desc, found.data, found.manifest)
    return convert_reading(found, reading, to, options)


def convert_reading(found: Identified, reading: Reading, to: str, options: WriteOptions) -> Conversion:
    view = reading.view
    target = by_name(to)
    if not isinstance(target, Writes):
        raise OcibridgeError(f"{target.title}s are written by an exporter, not as a manifest over the same blobs")
    key = target.key(None, options)
    if options.overrides:
        apply_overrides(view, options.overrides)
    written: Written | None = None
    if not options.overrides:
        if view.family == key:  # already that family: the same manifest
            written = Written(view.manifest, view.manifest_media_type, view.config_bytes,
                              found.manifest.config.mediaType, found.manifest.artifactType)
        else:
            written = restore(view, key, view.manifest_media_type)
    restored = written is not None and view.family != key
    if written is None:
        written = target.write(view, options)
    for part in view.parts:  # every blob there before anything is written (and, on a
        if not reading.blobs.exists(part.blob):  # registry, known as mountable from its repository)
            raise NotFound(f"{reading.blobs.describe()}: blob {part.blob.digest} ({part.path}) is missing")
    source_family = found.family.key(found.manifest, WriteOptions())
    return Conversion(ConvertedStore(reading.blobs, written), found, source_family, key, restored, written.losses)


@dataclass
class ConvertResult:
    reference: str
    conversion: Conversion
    stats: CopyStats

    def as_dict(self) -> dict[str, Any]:
        c = self.conversion
        return {
            "reference": self.reference,
            "from": c.source_family,
            "to": c.target_family,
            "sourceDigest": c.source.desc.digest,
            "restored": c.restored,
            "lost": [loss.as_dict() for loss in c.losses if not loss.kept],
            "keptForRoundTrip": [loss.as_dict() for loss in c.losses if loss.kept],
            **self.stats.as_dict(),
        }


def convert(
    src: str,
    dst: str,
    to: str,
    *,
    options: WriteOptions | None = None,
    registry_options: dict[str, Any] | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: ProgressFn | None = None,
) -> ConvertResult:
    """Convert the artifact at ``src`` into family ``to`` and store it at ``dst``."""
    registry_options = registry_options or {}
    source = open_store_target(src, **registry_options)
    family = by_name(to)
    if isinstance(family, Exports):  # Ollama, ModelCar: exported from the ModelPack form
        conversion = convert_artifact(source.store, source.reference, "modelpack", options)
        exported = family.export(conversion.store, conversion.descriptor, dst, registry_options=registry_options,
                                 concurrency=concurrency, progress=progress)
        conversion.target_family = family.name
        conversion.restored = False
        conversion.losses = exported.losses
        pinned = f"{dst.split('@', 1)[0]}@{exported.descriptor.digest}"
        return ConvertResult(pinned, conversion, exported.stats)
    conversion = convert_artifact(source.store, source.reference, to, options)
    target = open_store_target(dst, for_write=True, **registry_options)
    stats = copy(conversion.store, TAG, target.store, target.tag, concurrency=concurrency, progress=progress)
    pinned = f"{target.text.split('@', 1)[0]}@{conversion.descriptor.digest}"
    return ConvertResult(pinned, conversion, stats)
