"""Validation of a ModelPack artifact: config rules, diffIds against layers, annotations."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ocibridge.core import boundedjson
from ocibridge.core.fsutil import safe_relpath
from ocibridge.errors import OcibridgeError, UnsafePath, ValidationError
from ocibridge.layers.reader import uncompressed_digest
from ocibridge.model.config import parse_config
from ocibridge.model.draftcheck import draft_note, draft_reasons
from ocibridge.model.extract import fetch_manifest
from ocibridge.oci.cnaidraft import is_draft
from ocibridge.oci.empty import is_empty_model
from ocibridge.oci.mediatypes import (
    ANNOTATION_TITLE,
    OCI_MANIFEST,
    Family,
    Variant,
    family_of_artifact,
    parse_layer_media_type,
)
from ocibridge.oci.models import Descriptor, Index, Manifest, ManifestRead
from ocibridge.stores.base import Store

METADATA_FIELDS = ("name", "mode", "uid", "gid", "size", "mtime", "typeflag")
RUNTIMES = ("cri-o", "containerd")


@dataclass(frozen=True)
class Runtime:
    """The runtime ``validate --runtime`` checks readiness for; no version means every version."""

    name: str
    version: tuple[int, int] | None = None


@dataclass(frozen=True)
class RuntimeNote:
    """What a runtime (in versions ``since``..``until``, both inclusive) needs beyond the spec."""

    runtime: str
    text: str
    since: tuple[int, int] | None = None
    until: tuple[int, int] | None = None

    def applies(self, runtime: Runtime) -> bool:
        if runtime.name != self.runtime:
            return False
        if runtime.version is None:
            return True
        return (self.since is None or runtime.version >= self.since) and \
            (self.until is None or runtime.version <= self.until)


def parse_runtime(text: str) -> Runtime:
    """``cri-o``, ``containerd``, ``cri-o@1.34`` → a Runtime; ValueError says what is accepted."""
    name, _, version = text.strip().lower().partition("@")
    if name not in RUNTIMES:
        raise ValueError(f"unknown runtime {text!r} (known: {', '.join(RUNTIMES)}, optionally @MAJOR.MINOR)")
    if not version:
        return Runtime(name)
    match = re.fullmatch(r"v?(\d{1,4})\.(\d{1,4})(?:\.\d{1,6})?", version)
    if match is None:
        raise ValueError(f"runtime version {version!r}: expected MAJOR.MINOR (e.g. {name}@1.34)")
    return Runtime(name, (int(match.group(1)), int(match.group(2))))


def _uncompressed_digest(store: Store, layer: Descriptor, variant: Variant) -> str:
    return uncompressed_digest(store, layer)


def _check_layer(i: int, layer: Descriptor, family: Family, reasons: list[str],
                 warnings: list[str] | None = None, notes: list[RuntimeNote] | None = None) -> Variant | None:
    """Spec rules on one layer into ``reasons``; what the spec recommends and tools need (file
    metadata, a file path) into ``warnings``; what one runtime needs (a file name CRI-O reads)
    into ``notes``."""
    where = f"layers[{i}]"
    warn = warnings if warnings is not None else []
    note = notes if notes is not None else []
    kind = parse_layer_media_type(layer.mediaType)
    if kind is None:
        reasons.append(f"{where}.mediaType: {layer.mediaType!r} is not a ModelPack layer type")
        return None
    if kind.named_format:
        warn.append(f"{where}.mediaType: {layer.mediaType!r} is an older writer's name (Docker Model Runner's), "
                    f"read as {kind.media_type!r}, the spec's")
    if kind.family is not family:
        reasons.append(
            f"{where}.mediaType: family {kind.family.value} differs from the artifact's {family.value}"
        )
    annotations = layer.annotations or {}
    path = annotations.get(family.filepath_key)
    title = annotations.get(ANNOTATION_TITLE)
    if path and not (path == "." and kind.variant is not Variant.RAW):  # "." names a tar's root
        try:
            safe_relpath(path, here=False)  # pull refuses such a layer: say so before anyone pulls
        except UnsafePath as e:
            reasons.append(f"{where}.annotations.{family.filepath_key}: {e}; "
                           "must be a relative path inside the model")
    meta = annotations.get(family.metadata_key)
    if meta is None:
        warn.append(f"{where}.annotations: no {family.metadata_key}: the file mode is unknown (pulled as 0644)")
    else:
        try:
            parsed = boundedjson.loads(meta)
            missing = [k for k in METADATA_FIELDS if k not in parsed]
            if missing:
                reasons.append(f"{where}.annotations.{family.metadata_key}: missing {', '.join(missing)}")
        except ValueError:
            reasons.append(f"{where}.annotations.{family.metadata_key}: not valid JSON")
    if kind.variant is Variant.RAW and not title:
        if not path:
            warn.append(f"{where}.annotations: neither {family.filepath_key} nor {ANNOTATION_TITLE}: "
                        "no tool can name this file (pull refuses it)")
        else:
            skipping = "CRI-O 1.34+ (reads org.cncf.model.filepath)" if family is Family.CNAI else \
                "CRI-O 1.33 (reads org.cnai.model.filepath)"
            text = f"{where}.annotations: no {ANNOTATION_TITLE}: {skipping} will not show {path}"
            note.append(RuntimeNote("cri-o", text, since=(1, 34)) if family is Family.CNAI
                        else RuntimeNote("cri-o", text, until=(1, 33)))
    elif kind.variant is Variant.RAW and not path:
        warn.append(f"{where}.annotations: no {family.filepath_key} (the spec's file path); "
                    f"tools fall back to {ANNOTATION_TITLE}")
    return kind.variant


#: A media type as image-spec's JSON Schema writes RFC 6838's rule (defs-descriptor.json,
#: ``mediaType``): type/subtype, each a letter or digit then up to 126 of ``!#$&^_.+-`` and those.
MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}")


def media_type_syntax(manifest: Manifest) -> list[str]:
    """Every media type of the manifest and its descriptors that is no RFC 6838 type/subtype
    (image-spec's schema refuses them; ``validate --strict`` counts them)."""
    named: list[tuple[str, str | None]] = [("mediaType", manifest.mediaType), ("artifactType", manifest.artifactType),
                                           ("config.mediaType", manifest.config.mediaType)]
    named += [(f"layers[{i}].mediaType", layer.mediaType) for i, layer in enumerate(manifest.layers)]
    if manifest.subject is not None:
        named.append(("subject.mediaType", manifest.subject.mediaType))
    return [f"{where}: {value!r} is not a media type (RFC 6838: type/subtype)"
            for where, value in named if value is not None and MEDIA_TYPE.fullmatch(value) is None]


def validate_manifest(store: Store, manifest: Manifest, warnings: list[str] | None = None,
                      notes: list[RuntimeNote] | None = None) -> list[str]:
    """Every rule of the model-spec the artifact breaks, each as ``field: rule``; empty when
    valid. What the spec recommends goes into ``warnings``, what a runtime needs into ``notes``."""
    reasons: list[str] = []
    if warnings is not None:
        warnings.extend(media_type_syntax(manifest))
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
    if is_empty_model(manifest.layers):  # a model of no files: image-spec's empty descriptor (oci/empty.py)
        variants: list[Variant | None] = [None]
    else:
        variants = [_check_layer(i, layer, family, reasons, warnings, notes) for i, layer in enumerate(manifest.layers)]
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


CONTAINERD = ("containerd mounts images only, not artifacts: this will not mount there "
              "(ocibridge convert --to modelcar, or k8s modelcar --index)")


def validate(store: Store, reference: str, *, strict: bool = False,
             warnings: list[str] | None = None, runtime: Runtime | None = None,
             read: ManifestRead | None = None, top: Manifest | Index | None = None,
             entries: tuple[Manifest, ...] | None = None) -> Descriptor:
    """Raise ValidationError with every reason, or return the manifest descriptor.

    Spec conformance decides validity; what the spec recommends (file metadata, file paths) is
    collected into ``warnings``, and with ``strict`` it counts as reasons too. Runtime readiness
    (file names CRI-O reads, containerd's images-only rule) is checked only for ``runtime``: a
    runtime note is not a spec violation, so a conforming artifact passes ``strict`` without it.
    ``read``: the model's manifest as the caller read it; ``top``: what ``reference`` names, as
    read (the index the model is an entry of, or the manifest), and ``entries`` that index's other
    manifests as read: none of them is read again.
    """
    found: list[str] = []
    notes: list[RuntimeNote] = []
    desc, manifest = (read.desc, read.manifest) if read is not None else fetch_manifest(store, reference)
    if is_draft(manifest):  # named as what it is, not judged by rules it predates (draftcheck.py)
        reasons = draft_reasons(manifest)
        found.append(draft_note(manifest))
    else:
        reasons = validate_manifest(store, manifest, found, notes)
    if runtime is not None and runtime.name == "containerd" and not _has_image(store, reference, top, entries):
        notes.append(RuntimeNote("containerd", CONTAINERD))
    if runtime is not None:
        found += [n.text for n in notes if n.applies(runtime)]
    if warnings is not None:
        warnings.extend(found)
    if strict:
        reasons += [f"(strict) {w}" for w in found]
    if reasons:
        raise ValidationError(reasons)
    return desc


def _has_image(store: Store, reference: str, top: Manifest | Index | None,
               entries: tuple[Manifest, ...] | None = None) -> bool:
    """Whether ``reference`` (``top``, where the caller read it) is an index that also serves an
    image (what containerd mounts); ``entries``: its manifests the caller read (every one)."""
    from ocibridge.oci.mediatypes import INDEX_TYPES
    from ocibridge.oci.models import parse_manifest_bytes

    index = top
    if index is None:
        desc = store.resolve(reference)
        if desc.mediaType not in INDEX_TYPES:
            return False
        index = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
    if not isinstance(index, Index):
        return False
    if entries is not None:
        return any(_serves_image(node) for node in entries)
    return any(_serves_image(parse_manifest_bytes(store.fetch_bytes(entry), entry.mediaType))
               for entry in index.manifests[:32])


def _serves_image(node: Manifest | Index) -> bool:
    from ocibridge.oci.mediatypes import OCI_CONFIG

    return isinstance(node, Manifest) and node.config.mediaType == OCI_CONFIG and not node.artifactType
