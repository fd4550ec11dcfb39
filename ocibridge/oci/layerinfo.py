"""What a layer's annotations say of the file it carries: its model path and its mode."""

from __future__ import annotations

import contextlib

from ocibridge.core import boundedjson
from ocibridge.errors import OcibridgeError
from ocibridge.oci.cnaidraft import draft_layer_type
from ocibridge.oci.mediatypes import ANNOTATION_TITLE, Family, LayerType, Variant, parse_layer_media_type
from ocibridge.oci.models import Descriptor


def layer_type(desc: Descriptor) -> LayerType | None:
    """A model layer's (family, kind, variant): by its ModelPack media type, or for a layer of
    the early CNAI draft by its ``artifactType`` over an image-layer type (oci/cnaidraft.py)."""
    return parse_layer_media_type(desc.mediaType) or draft_layer_type(desc)


def layer_path(desc: Descriptor) -> str | None:
    """The model path a layer carries: the filepath annotation of either family, else the title."""
    annotations = desc.annotations or {}
    for family in Family:
        if family.filepath_key in annotations:
            return annotations[family.filepath_key]
    return annotations.get(ANNOTATION_TITLE)


def is_raw(layer: Descriptor) -> bool:
    """A layer whose bytes are the file's bytes (so byte ``i`` of the file is byte ``i`` of the
    blob): a raw ModelPack layer, or any non-tar layer with a file path annotation."""
    parsed = parse_layer_media_type(layer.mediaType)
    if parsed is not None:
        return parsed.variant is Variant.RAW
    return "tar" not in layer.mediaType


def raw_file_path(layer: Descriptor, error: type[OcibridgeError] = OcibridgeError) -> str | None:
    """The model path of a raw layer (one file, its blob's bytes); None for a tar layer. A raw
    layer naming no path is refused (as ``error``): nobody could say where its file goes."""
    kind = layer_type(layer)
    if kind is not None and kind.variant is not Variant.RAW:
        return None  # a tar layer (the draft's too: its filepath names the tar's content, not a file)
    name = layer_path(layer)
    if name is None:
        raise error(f"layer {layer.digest} has no file path annotation")
    return name


def layer_mode(desc: Descriptor) -> int:
    """0o755 for a layer whose file metadata says executable, else 0o644."""
    annotations = desc.annotations or {}
    for family in Family:
        raw = annotations.get(family.metadata_key)
        if raw:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                mode = int(boundedjson.loads(raw).get("mode", 0o644))
                return 0o755 if mode & 0o111 else 0o644
    return 0o644
