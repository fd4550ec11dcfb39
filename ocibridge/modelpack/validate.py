"""Validation of a ModelPack artifact: config rules, diffIds against layers, annotations."""

from __future__ import annotations

import hashlib
import json

from ..errors import OcibridgeError, UnsafePath, ValidationError
from ..fsutil import safe_relpath
from ..oci.digest import CHUNK
from ..oci.mediatypes import (
    ANNOTATION_TITLE,
    OCI_MANIFEST,
    Family,
    Variant,
    family_of_artifact,
    parse_layer_media_type,
)
from ..oci.models import Descriptor, Manifest
from ..stores.base import Store
from .config import parse_config
from .extract import _decompressed, fetch_manifest

METADATA_FIELDS = ("name", "mode", "uid", "gid", "size", "mtime", "typeflag")


def _uncompressed_digest(store: Store, layer: Descriptor, variant: Variant) -> str:
    h = hashlib.sha256()
    with store.open_blob(layer) as reader:
        stream = _decompressed(reader, variant, layer.size)
        while chunk := stream.read(CHUNK):
            h.update(chunk)
        while reader.read(CHUNK):
            pass
    return "sha256:" + h.hexdigest()


def _check_layer(i: int, layer: Descriptor, family: Family, reasons: list[str]) -> Variant | None:
    where = f"layers[{i}]"
    kind = parse_layer_media_type(layer.mediaType)
    if kind is None:
        reasons.append(f"{where}.mediaType: {layer.mediaType!r} is not a ModelPack layer type")
        return None
    if kind.family is not family:
        reasons.append(
            f"{where}.mediaType: family {kind.family.value} differs from the artifact's {family.value}"
        )
    annotations = layer.annotations or {}
    path = annotations.get(family.filepath_key)
    if not path:
        reasons.append(f"{where}.annotations: {family.filepath_key} is required")
    elif not (path == "." and kind.variant is not Variant.RAW):  # "." names a tar's root
        try:
            safe_relpath(path)  # pull refuses such a layer: say so before anyone pulls
        except UnsafePath as e:
            reasons.append(f"{where}.annotations.{family.filepath_key}: {e}; "
                           "must be a relative path inside the model")
    meta = annotations.get(family.metadata_key)
    if meta is None:
        reasons.append(f"{where}.annotations: {family.metadata_key} is required")
    else:
        try:
            parsed = json.loads(meta)
            missing = [k for k in METADATA_FIELDS if k not in parsed]
            if missing:
                reasons.append(f"{where}.annotations.{family.metadata_key}: missing {', '.join(missing)}")
        except ValueError:
            reasons.append(f"{where}.annotations.{family.metadata_key}: not valid JSON")
    if kind.variant is Variant.RAW and not annotations.get(ANNOTATION_TITLE):
        reasons.append(f"{where}.annotations: {ANNOTATION_TITLE} is required on raw layers")
    return kind.variant


def validate_manifest(store: Store, manifest: Manifest) -> list[str]:
    """Every rule the artifact breaks, each as ``field: rule``; empty when valid."""
    reasons: list[str] = []
    if manifest.mediaType != OCI_MANIFEST:
        reasons.append(f"mediaType: must be {OCI_MANIFEST}, is {manifest.mediaType!r}")
    family = family_of_artifact(manifest.artifactType, manifest.config.mediaType)
    if family is None:
        reasons.append(
            f"artifactType/config.mediaType: not a ModelPack artifact ({manifest.artifactType!r}, "
            f"{manifest.config.mediaType!r})"
        )
        return reasons
    if manifest.artifactType != family.artifact_type:
        reasons.append(f"artifactType: must be {family.artifact_type}")
    if manifest.config.mediaType != family.config_media_type:
        reasons.append(f"config.mediaType: must be {family.config_media_type}")
    config = None
    try:
        config = parse_config(store.fetch_bytes(manifest.config))
    except ValidationError as e:
        reasons.extend(f"config: {r}" for r in e.reasons)
    except OcibridgeError as e:
        reasons.append(f"config: {e}")
    if not manifest.layers:
        reasons.append("layers: at least one layer is required")
    variants = [_check_layer(i, layer, family, reasons) for i, layer in enumerate(manifest.layers)]
    if config is None:
        return reasons
    diff_ids = config.modelfs.diffIds
    if len(diff_ids) != len(manifest.layers):
        reasons.append(
            f"modelfs.diffIds: {len(diff_ids)} entries for {len(manifest.layers)} layers"
        )
        return reasons
    for i, (layer, variant, diff_id) in enumerate(zip(manifest.layers, variants, diff_ids, strict=True)):
        if not store.exists(layer):
            reasons.append(f"layers[{i}]: blob {layer.digest} is missing from the store")
            continue
        if variant in (Variant.TAR_GZIP, Variant.TAR_ZSTD):
            try:
                expected = _uncompressed_digest(store, layer, variant)
            except OcibridgeError as e:
                reasons.append(f"layers[{i}]: {e}")
                continue
        else:
            expected = layer.digest
        if diff_id != expected:
            reasons.append(
                f"modelfs.diffIds[{i}]: {diff_id} does not match layer content {expected}"
            )
    return reasons


def validate(store: Store, reference: str) -> Descriptor:
    """Raise ValidationError with every reason, or return the manifest descriptor."""
    desc, manifest = fetch_manifest(store, reference)
    reasons = validate_manifest(store, manifest)
    if reasons:
        raise ValidationError(reasons)
    return desc
