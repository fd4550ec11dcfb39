"""``convert`` as an API call, the one door of ``ocibridge convert``: the two references located
once here (the edge), the conversion of :func:`ocibridge.kinds.conversion.convert` (which
takes locators only), then the evidence asked for, attached to the manifest written. The
families are loaded when a conversion runs, not when this module is imported."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ocibridge.api.options import AttestOptions, TransferOptions
from ocibridge.chunks.choice import refuse_for_stored
from ocibridge.errors import UsageError
from ocibridge.places.locate import Locator, Role, locate, text_of
from ocibridge.places.locators import KindPlace
from ocibridge.places.targets import closes_its_stores

if TYPE_CHECKING:
    from ocibridge.chunks.choice import ChunkChoice
    from ocibridge.kinds.conversion import ConvertResult
    from ocibridge.kinds.family import WriteOptions
    from ocibridge.stores.registry.options import RegistryOptions
    from ocibridge.transfer.progress import ProgressFn


@closes_its_stores
def convert(
    src: str | Locator,
    dst: str | Locator,
    to: str,
    *,
    media_types: str | None = None,
    overrides: Mapping[str, str] | None = None,
    transfer: TransferOptions | None = None,
    progress: ProgressFn | None = None,
    attest: AttestOptions | None = None,
    options: WriteOptions | None = None,
    registry_options: RegistryOptions | None = None,
    concurrency: int | None = None,
    chunks: ChunkChoice | None = None,
) -> ConvertResult:
    """Convert the artifact at ``src`` (a model reference, or ``hf:ORG/NAME[@REVISION]``) into
    family ``to`` (:func:`ocibridge.api.choices.families`) and store it at ``dst``.

    ``media_types``: the ModelPack naming to write (``cnai``, ``cncf``); ``overrides``:
    descriptor/config fields to set (``{"version": "2.0"}``); ``transfer``: how registries are
    reached; ``attest``: evidence to attach to the manifest written (the provenance names the
    source manifest, by digest); ``chunks``: push's chunk settings for the artifact an
    ``hf:ORG/NAME`` source is built into (None: its defaults), refused for a store's artifact,
    whose chunk table is carried as it is. ``options``/``registry_options``/``concurrency`` are
    the lower-level values, for callers of :func:`ocibridge.kinds.conversion.convert`."""
    from ocibridge.api.archive_out import archive_output
    from ocibridge.kinds.conversion import convert as convert_located
    from ocibridge.kinds.family import WriteOptions
    from ocibridge.oci.mediatypes import Family

    if archive_output(dst) is not None:  # else it would name a model of the local store, out.carton:latest
        raise UsageError(f"{dst}: an archive file; convert writes a model of another family to a store "
                         "(oci:PATH:TAG, host/repo:tag or NAME:TAG); push or copy a model into an archive")
    src_ref, dst_ref = locate(src, Role.MODEL), locate(dst, Role.DESTINATION)
    if chunks is not None and not (isinstance(src_ref, KindPlace) and not src_ref.is_store):
        raise refuse_for_stored(text_of(src_ref), "convert carries a stored artifact's chunk table as it is",
                                "an hf:ORG/NAME source, which convert builds")
    evidence = None
    if attest is not None and attest.wanted:  # the key and the BOM's library, before a byte is sent
        from ocibridge.api import evidence as evidence_api

        evidence = evidence_api.prepare(attest, dst_ref)
    if options is None and (media_types is not None or overrides):
        options = WriteOptions(media_types=Family(media_types or Family.CNAI.value), overrides=dict(overrides or {}))
    if transfer is not None:
        registry_options = registry_options or transfer.registry_options()
        concurrency = concurrency or transfer.concurrency
    more: dict[str, Any] = {} if concurrency is None else {"concurrency": concurrency}
    result = convert_located(src_ref, dst_ref, to, options=options, registry_options=registry_options,
                             progress=progress, chunks=chunks, **more)
    if evidence is None:
        return result
    digest = result.reference.rsplit("@", 1)[1]  # what was read: the source manifest, by digest
    attached = evidence_api.attach_from_source(evidence, "convert", src_ref, dst_ref, digest,
                                               result.conversion.source.desc, transfer or TransferOptions())
    return dataclasses.replace(result, evidence=attached)
