"""``convert``: an artifact of any family becomes another family, blobs reused byte for byte.

The source is identified by what it is (:func:`.registry.identify`), read into the neutral
view, written as the target family (or given back exactly, when it carries the target's
origin), and moved by the one graph copy from a :class:`.view.ConvertedStore`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.errors import NotFound, OcibridgeError
from ocibridge.kinds.chunks import carry_chunks
from ocibridge.kinds.families import Identified, by_name, identify
from ocibridge.kinds.family import Exported, Exports, Reading, WriteOptions, Writes
from ocibridge.kinds.neutral import Loss, ModelView, Written
from ocibridge.kinds.origin import restore
from ocibridge.kinds.overrides import set_flagged_fields
from ocibridge.kinds.repack import HoldsOnly, repack
from ocibridge.kinds.view import TAG, ConvertedStore
from ocibridge.model.paths import ArtifactPaths
from ocibridge.oci.models import Descriptor
from ocibridge.places.locators import Locator, text_of
from ocibridge.places.targets import StoreTarget, open_source, open_store_target
from ocibridge.stores.base import Store
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import DEFAULT_CONCURRENCY, CopyHooks, CopyStats, copy
from ocibridge.transfer.progress import ProgressFn

if TYPE_CHECKING:
    from ocibridge.chunks.choice import ChunkChoice
    from ocibridge.stores.registry.options import RegistryOptions


@dataclass
class Conversion:
    """A converted artifact ready to copy, and what the conversion found and lost."""

    store: ConvertedStore
    source: Identified
    source_family: str
    target_family: str
    restored: bool
    losses: list[Loss] = field(default_factory=list)
    changes: list[Loss] = field(default_factory=list)  # layers rewritten for the target (new digests)

    @property
    def descriptor(self) -> Descriptor:
        return self.store.descriptor


def apply_overrides(view: ModelView, overrides: dict[str, str]) -> None:
    """Set descriptor/config fields from flags (``--arch`` → config.architecture, ...)."""
    set_flagged_fields(view.descriptor, view.config, overrides)
    if overrides:
        view.edited = True


def convert_artifact(store: Store, reference: str, to: str, options: WriteOptions | None = None,
                     *, then: str | None = None, shown: str | None = None, chunks: bool = False) -> Conversion:
    """The artifact ``reference`` names in ``store``, as family ``to`` (nothing is written).
    ``then``: the family an exporter writes from that form, whose layer needs apply too;
    ``shown``: the reference as the user wrote it, for messages; ``chunks``: carry the chunk
    table the source binds (kinds/chunks.py; an exported form keeps none)."""
    options = options or WriteOptions()
    found = identify(store, reference, shown=shown)
    reading = found.family.read(store, found.desc, found.data, found.manifest)
    conversion = convert_reading(found, reading, to, options, then=then)
    if chunks:
        family = by_name(then) if then is not None else None
        before = conversion.store.descriptor.digest
        conversion.store, lost = carry_chunks(store, found.desc.digest, found.manifest, conversion.store,
                                              keeps_table=family is None,
                                              family=family.name if family is not None else to)
        if conversion.store.descriptor.digest != before:  # re-bound: no longer the original bytes
            conversion.restored = False
        conversion.losses += lost
    return conversion


def convert_reading(found: Identified, reading: Reading, to: str, options: WriteOptions,
                    *, then: str | None = None) -> Conversion:
    target = by_name(to)
    if not isinstance(target, Writes):
        raise OcibridgeError(f"{target.title}s are written by an exporter, not as a manifest over the same blobs")
    changes: list[Loss] = []
    needs = by_name(then) if then is not None else target
    if isinstance(needs, HoldsOnly):
        reading, changes = repack(reading, needs, needs.title)
    view = reading.view
    key = target.key(None, options)
    if options.overrides:
        apply_overrides(view, options.overrides)
    written: Written | None = None
    if not options.overrides and not changes:  # rewritten layers: the source bytes no longer fit
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
    converted = ConvertedStore(reading.blobs, written)
    if target.name == "modelpack":  # what no pull could write is not written: pull's own judgement of its paths
        ArtifactPaths(converted.manifest)
    return Conversion(converted, found, source_family, key, restored, [*reading.losses, *written.losses], changes)


@dataclass(frozen=True)
class ConvertResult:
    """What a conversion wrote: ``reference`` pinned by digest, the ``conversion`` (source and
    target families, fields lost, kept for a round trip or changed), the copy's ``stats``, and
    the ``evidence`` attached (None: none asked for). ``as_dict()`` is ``convert --json``."""

    reference: str
    conversion: Conversion
    stats: CopyStats
    evidence: Mapping[str, Any] | None = None

    def chunks(self) -> dict[str, Any] | None:
        """The chunk table the converted manifest binds (carried from the source), if any."""
        held = self.conversion.store.chunks
        if held is None:
            return None
        return {"table": held.table.descriptor().digest, "layers": len(held.table.layers),
                "referrer": held.descriptor.digest}

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
            "changed": [change.as_dict() for change in c.changes],
            "chunks": self.chunks(),
            **self.stats.as_dict(),
            **({} if self.evidence is None else {"evidence": dict(self.evidence)}),
        }


def convert_staged(store: Store, reference: str, to: str, scratch: Path,
                   options: WriteOptions | None = None) -> tuple[Store, Descriptor, Conversion]:
    """(store, root, conversion): the artifact ``reference`` names as family ``to``, ready for a
    copy. A family written over the same blobs is a view (nothing written); one written by an
    exporter (Ollama, ModelCar: new manifests, maybe new layers) is exported into an OCI layout
    at ``scratch``, which the caller removes once the copy is done (mirror jobs)."""
    family = by_name(to)
    if not isinstance(family, Exports):
        conversion = convert_artifact(store, reference, to, options, chunks=True)
        return conversion.store, conversion.descriptor, conversion
    conversion = convert_artifact(store, reference, "modelpack", options, then=to, chunks=True)
    staging = LayoutStore(scratch, create=True)
    exported = family.export(conversion.store, conversion.descriptor,
                             StoreTarget(staging, TAG, TAG, f"oci:{scratch}:{TAG}"),
                             concurrency=DEFAULT_CONCURRENCY, progress=None)
    _exported_losses(conversion, family.name, exported)
    return staging, exported.descriptor, conversion


def _exported_losses(conversion: Conversion, family: str, exported: Exported) -> None:
    conversion.target_family = family
    conversion.restored = False
    if not exported.keeps_source:  # what the ModelPack form kept in annotations is gone too
        conversion.losses = [Loss(x.field, x.value, False) for x in conversion.losses]
    conversion.losses = [*conversion.losses, *exported.losses]


def convert(
    src: Locator,
    dst: Locator,
    to: str,
    *,
    options: WriteOptions | None = None,
    registry_options: RegistryOptions | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: ProgressFn | None = None,
    chunks: ChunkChoice | None = None,
) -> ConvertResult:
    """Convert the artifact at ``src`` into family ``to`` and store it at ``dst``. ``src`` may
    be ``hf:ORG/NAME[@REVISION]``: the artifact a push of that Hugging Face cache model builds
    (``chunks``: with push's chunk settings; None, its defaults)."""
    src_ref, dst_ref = src, dst  # located at the edge (cli/convert.py)
    # hf: the artifact a push of it builds
    source = open_source(src_ref, options=registry_options, chunks=chunks)
    source_store, source_reference, shown = source.store, source.reference, text_of(src_ref)
    family = by_name(to)
    if isinstance(family, Exports):  # Ollama, ModelCar: exported from the ModelPack form
        conversion = convert_artifact(source_store, source_reference, "modelpack", options, then=to, shown=shown,
                                      chunks=True)
        target = open_store_target(dst_ref, for_write=True, options=registry_options)
        exported = family.export(conversion.store, conversion.descriptor, target,  # undone on failure
                                 concurrency=concurrency, progress=progress)
        _exported_losses(conversion, family.name, exported)
        pinned = f"{target.text.split('@', 1)[0]}@{exported.descriptor.digest}"
        return ConvertResult(pinned, conversion, exported.stats)
    conversion = convert_artifact(source_store, source_reference, to, options, shown=shown, chunks=True)
    target = open_store_target(dst_ref, for_write=True, options=registry_options)
    stats = copy(conversion.store, TAG, target.store, target.tag, concurrency=concurrency, progress=progress,
                 referrers=conversion.store.chunks is not None,  # the carried chunk table's referrer
                 hooks=CopyHooks(undo_on_failure=True))  # a failed convert leaves a layout as it was
    pinned = f"{target.text.split('@', 1)[0]}@{conversion.descriptor.digest}"
    return ConvertResult(pinned, conversion, stats)
