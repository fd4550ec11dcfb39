"""ModelPack (``vnd.cnai`` and ``vnd.cncf``): the pivot every other family maps onto.

Read: layers by their media type (kind, variant), path from the filepath annotation (either
name) or the title, diffIds from ``modelfs``. Write: ocibridge's builder conventions (filepath,
file metadata, untested=false, title on raw layers), the config checked by the strict model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocibridge.errors import SourceError, ValidationError
from ocibridge.kinds.family import Reading, WriteOptions
from ocibridge.oci.cnaidraft import is_draft
from ocibridge.oci.empty import EMPTY_DIGEST, empty_layer, is_empty_layer
from ocibridge.oci.mediatypes import (
    ANNOTATION_TITLE,
    OCI_MANIFEST,
    Family,
    Variant,
    family_of_artifact,
    layer_media_type,
    parse_layer_media_type,
)
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import Store

if TYPE_CHECKING:  # the neutral form loads with a read or a write: a pull's detection (matches) makes none
    from ocibridge.kinds.neutral import Loss, ModelView, Written

DESCRIPTOR_FIELDS = ("createdAt", "authors", "family", "name", "docURL", "sourceURL", "datasetsURL",
                     "version", "revision", "vendor", "licenses", "title", "description")
CONFIG_FIELDS = ("architecture", "format", "paramSize", "precision", "quantization", "capabilities")


def _family(manifest: Manifest) -> Family | None:
    return family_of_artifact(manifest.artifactType, manifest.config.mediaType)


class ModelPackFamily:
    name = "modelpack"
    title = "ModelPack artifact"

    def matches(self, manifest: Manifest) -> bool:
        return _family(manifest) is not None

    def key(self, manifest: Manifest | None, options: WriteOptions) -> str:
        family = _family(manifest) if manifest is not None else None
        return f"modelpack-{(family or options.media_types).value}"

    def read(self, store: Store, desc: Descriptor, data: bytes, manifest: Manifest) -> Reading:
        if is_draft(manifest):  # the early CNAI draft: its files packed as the current form (draft.py)
            from ocibridge.kinds.modelpack.draft import read_draft

            artifact, losses = read_draft(store, desc, manifest)
            reading = self.read(artifact, artifact.descriptor, artifact.manifest_bytes, artifact.manifest)
            reading.losses = losses
            return reading
        from ocibridge.kinds.common import fetch_json, items, layer_file_path, layer_metadata, section
        from ocibridge.kinds.neutral import ModelView, Part

        config_bytes, doc = fetch_json(store, manifest.config, "ModelPack config")
        diff_ids = items(section(doc, "modelfs"), "diffIds")
        parts = []
        for i, layer in enumerate(manifest.layers):
            if is_empty_layer(layer):
                continue  # a model of no files (oci/empty.py): its one layer holds no file
            lt = parse_layer_media_type(layer.mediaType)
            if lt is None:
                raise SourceError(f"layer {layer.digest}: {layer.mediaType!r} is not a ModelPack layer type")
            path = layer_file_path(layer)
            if path is None:
                raise SourceError(f"layer {layer.digest} has no file path annotation")
            meta, mode = layer_metadata(layer)
            diff_id = diff_ids[i] if i < len(diff_ids) and isinstance(diff_ids[i], str) else layer.digest
            parts.append(Part(layer, lt.kind, lt.variant, path, diff_id, mode=mode, file_metadata=meta))
        view = ModelView(
            family=self.key(manifest, WriteOptions()),
            parts=parts,
            descriptor=dict(section(doc, "descriptor")),
            config=dict(section(doc, "config")),
            annotations=dict(manifest.annotations or {}),
            manifest=data,
            config_bytes=config_bytes,
            manifest_media_type=desc.mediaType,
        )
        from ocibridge.kinds.kitops.family import apply_kitfile_annotation

        apply_kitfile_annotation(view)
        return Reading(view, store)

    def write(self, view: ModelView, options: WriteOptions) -> Written:
        from ocibridge.kinds.common import file_metadata, short
        from ocibridge.kinds.neutral import Loss, Written
        from ocibridge.kinds.origin import can_keep, carried, strip

        family = options.media_types
        key = self.key(None, options)
        layers = []
        for part in view.parts:
            annotations = {family.filepath_key: part.path}
            annotations[family.metadata_key] = part.file_metadata or file_metadata(
                part.path, part.mode, part.blob.size, part.variant)
            annotations[family.untested_key] = "false"
            if part.variant is Variant.RAW:
                annotations[ANNOTATION_TITLE] = part.path
            layers.append(part.bare_blob(layer_media_type(part.kind, part.variant, family), annotations))
        if not layers:  # a model of no files: the empty descriptor, as the builder writes it (oci/empty.py)
            layers.append(empty_layer())
        kept = can_keep(view, key)
        losses: list[Loss] = []
        config_bytes = _config_bytes(view, losses, kept)
        annotations = {**strip(view.annotations), **carried(view, key, config_bytes)}
        config_desc = Descriptor.for_bytes(family.config_media_type, config_bytes)
        manifest = Manifest(
            mediaType=OCI_MANIFEST,
            artifactType=family.artifact_type,
            config=config_desc,
            layers=layers,
            annotations=annotations or None,
        )
        losses.extend(Loss(name, short(value), kept) for name, value in sorted(view.extra.items()))
        return Written(manifest.to_json_bytes(), OCI_MANIFEST, config_bytes, family.config_media_type,
                       family.artifact_type, losses)


def _config_bytes(view: ModelView, losses: list[Loss], kept: bool) -> bytes:
    """The config from the view's fields; a field the strict model refuses is dropped and
    reported rather than failing the conversion."""
    from ocibridge.kinds.common import short
    from ocibridge.kinds.neutral import Loss
    from ocibridge.model.config import parse_config

    descriptor = {k: view.descriptor[k] for k in DESCRIPTOR_FIELDS if view.descriptor.get(k) not in (None, "", [])}
    config = {k: view.config[k] for k in CONFIG_FIELDS if view.config.get(k) not in (None, "", [])}
    for part, fields in (("descriptor", view.descriptor), ("config", view.config)):
        known = DESCRIPTOR_FIELDS if part == "descriptor" else CONFIG_FIELDS
        for k, v in fields.items():
            if k not in known and v not in (None, "", []):
                losses.append(Loss(f"{part}.{k}", short(v), kept))
    doc = {
        "descriptor": descriptor,
        "config": config,
        "modelfs": {"type": "layers", "diffIds": [p.diff_id for p in view.parts] or [EMPTY_DIGEST]},
    }
    for _ in range(len(descriptor) + len(config) + 1):
        try:
            return parse_config(doc).to_json_bytes()
        except ValidationError as e:
            dropped = False
            for reason in e.reasons:
                path = reason.split(":", 1)[0].split(".")
                if len(path) >= 2 and path[0] in ("descriptor", "config") and path[1] in doc[path[0]]:
                    value = doc[path[0]].pop(path[1])
                    losses.append(Loss(f"{path[0]}.{path[1]}", short(value), kept))
                    dropped = True
            if not dropped:
                raise SourceError(f"cannot write a ModelPack config: {e}") from None
    raise SourceError("cannot write a ModelPack config")
