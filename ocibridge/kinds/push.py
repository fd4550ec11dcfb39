"""``push DIR --to FAMILY``: the model is built as ModelPack (in memory, nothing staged), then
written as the asked family and copied; raw files keep their digests in every family."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocibridge.chunks.chunking import ChunkPolicy, chunk_table
from ocibridge.kinds.conversion import Conversion, convert_artifact
from ocibridge.kinds.families import by_name
from ocibridge.kinds.family import Exports, WriteOptions
from ocibridge.kinds.overrides import set_flagged_fields
from ocibridge.kinds.view import TAG
from ocibridge.model.builder import ARTIFACT_TAG, BuildOptions, build, plan_layers
from ocibridge.model.package import ModelPackage
from ocibridge.oci.mediatypes import Variant
from ocibridge.places.targets import open_store_target
from ocibridge.transfer.copy import CopyHooks, copy
from ocibridge.transfer.progress import ProgressFn
from ocibridge.transfer.results import PushResult

if TYPE_CHECKING:
    from ocibridge.places.locators import Locator
    from ocibridge.stores.registry.options import RegistryOptions


def apply_to_package(package: ModelPackage, overrides: dict[str, str]) -> None:
    """``--arch`` & co. on a push: set the fields before the config is written."""
    set_flagged_fields(package.descriptor, package.config, overrides)


def push_family(
    package: ModelPackage,
    build_options: BuildOptions,
    dest: Locator,
    to: str,
    *,
    registry_options: RegistryOptions | None,
    concurrency: int,
    progress: ProgressFn | None,
    chunks: ChunkPolicy | None = None,
) -> PushResult:
    """``chunks``: the built manifest binds a chunk table of the large raw files (their one read
    hashes the file and its chunks), which a family keeping annotations carries, with its
    referrer (kinds/chunks.py); an exported family keeps none, so none is made for it."""
    family = by_name(to)
    table = None
    if chunks is not None and not isinstance(family, Exports):
        raw = [layer.files[0] for layer in plan_layers(package, build_options) if layer.variant is Variant.RAW]
        table = chunk_table(raw, chunks, {})
    artifact = build(package, build_options, table)
    if isinstance(family, Exports):  # Ollama, ModelCar: exported from the built ModelPack
        target = open_store_target(dest, for_write=True, options=registry_options)
        exported = family.export(artifact, artifact.descriptor, target, concurrency=concurrency,
                                 progress=progress)
        pinned = f"{target.text.split('@', 1)[0]}@{exported.descriptor.digest}"
        return PushResult(pinned, exported.descriptor, exported.stats,
                          {"family": family.name, "lost": [loss.as_dict() for loss in exported.losses]})
    conversion: Conversion = convert_artifact(artifact, ARTIFACT_TAG, to,
                                              WriteOptions(media_types=build_options.family),
                                              chunks=table is not None)
    target = open_store_target(dest, for_write=True, options=registry_options)
    stats = copy(conversion.store, TAG, target.store, target.tag, concurrency=concurrency, progress=progress,
                 referrers=conversion.store.chunks is not None,  # the chunk table's referrer
                 hooks=CopyHooks(undo_on_failure=True))  # a failed push leaves a layout as it was
    pinned = f"{target.text.split('@', 1)[0]}@{conversion.descriptor.digest}"
    extra: dict[str, object] = {"family": conversion.target_family,
                                "lost": [loss.as_dict() for loss in conversion.losses]}
    held = conversion.store.chunks
    if held is not None:
        extra["chunks"] = {"table": held.table.descriptor().digest, "referrer": held.descriptor.digest,
                           "layers": len(held.table.layers)}
    return PushResult(pinned, conversion.descriptor, stats, extra)
