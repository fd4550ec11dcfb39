"""``k8s check``: will this reference mount as an image volume, and what will the pod see?

CRI-O mounts an *artifact* by bind-mounting every named layer blob as one file; it mounts an
*image* (and containerd mounts only images) by unpacking its tar layers. The result lists the
exact tree at the mount path and every reason it would not mount, in one line each.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..errors import OcibridgeError
from ..oci.mediatypes import Family, parse_layer_media_type
from ..oci.models import Descriptor, ImageConfig, Manifest
from ..stores.base import Store
from .layers import Tree, TreeEntry, apply_layer
from .runtime import (
    DEFAULT_PLATFORM,
    IMAGE_CONFIG_TYPES,
    TAR_LAYER_TYPES,
    Runtime,
    Selection,
    confine,
    crio_name,
    parse_platform,
    platform_matches,
    select,
)

#: Mode of a blob file in CRI-O's artifact store (containers/image writes layout blobs 0644).
CRIO_BLOB_MODE = 0o644
MODELCAR_ROOT = "models"


@dataclass
class CheckResult:
    reference: str
    runtime: Runtime
    platform: str
    manifest: Descriptor  # the manifest the runtime ends up with
    kind: str  # "image" (unpacked) or "artifact" (blobs as files)
    will_mount: bool
    tree: list[TreeEntry] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # why it will not mount
    warnings: list[str] = field(default_factory=list)  # mounts, but not as one might expect
    sub_path: str | None = None  # suggested volumeMounts[].subPath
    diff_ids_verified: bool | None = None
    layers_hidden: int = 0  # layers whose content the pod will not see (skipped or shadowed)

    def to_json(self) -> dict:
        return {
            "reference": self.reference,
            "runtime": self.runtime.value,
            "platform": self.platform,
            "manifest": self.manifest.digest,
            "kind": self.kind,
            "willMount": self.will_mount,
            "subPath": self.sub_path,
            "diffIdsVerified": self.diff_ids_verified,
            "layersHidden": self.layers_hidden,
            "reasons": self.reasons,
            "warnings": self.warnings,
            "tree": [e.to_json() for e in self.tree],
        }


def check(
    store: Store,
    reference: str,
    runtime: str | Runtime,
    *,
    platform: str = DEFAULT_PLATFORM,
    read_layers: bool = True,
) -> CheckResult:
    """Decide as ``runtime`` on ``platform`` would. For images every layer is read once (digest
    and diff_id checked, tree listed) unless ``read_layers`` is False."""
    rt = Runtime.parse(runtime)
    sel = select(store, reference, platform)
    if rt is Runtime.CRIO and not sel.is_image:
        result = _crio_artifact(sel, reference, platform)
    else:
        result = _image(store, sel, reference, rt, platform, read_layers)
    result.warnings[:0] = sel.notes
    result.will_mount = not result.reasons
    return result


def _blank(sel: Selection, reference: str, rt: Runtime, platform: str, kind: str) -> CheckResult:
    return CheckResult(reference, rt, platform, sel.desc, kind, False)


def _crio_artifact(sel: Selection, reference: str, platform: str) -> CheckResult:
    result = _blank(sel, reference, Runtime.CRIO, platform, "artifact")
    placed: dict[str, tuple[int, Descriptor]] = {}
    for i, layer in enumerate(sel.manifest.layers):
        name = crio_name(layer)
        if name is None:
            result.warnings.append(_unnamed(i, layer))
            result.layers_hidden += 1
            continue
        path, clamped = confine(name)
        if not path:
            result.reasons.append(f"layer {i} is named {name!r}, which is the mount path itself")
            continue
        if clamped:
            result.warnings.append(
                f"layer {i} name {name!r} escapes the mount; CRI-O confines it to {path}"
            )
        tar = _is_tar(layer)
        if tar:
            result.warnings.append(
                f"layer {i} is a tar layer ({layer.mediaType}): CRI-O does not unpack it, "
                f"the pod sees the archive itself as the file {path}"
            )
        if not tar and _executable(layer):
            result.warnings.append(
                f"{path} loses its executable bit: CRI-O mounts blobs with mode {CRIO_BLOB_MODE:04o}"
            )
        if path in placed:
            result.warnings.append(
                f"duplicate name {path}: layers {placed[path][0]} and {i}; only layer {i} is visible"
            )
            result.layers_hidden += 1
        placed[path] = (i, layer)
    if not placed and not result.reasons:
        result.reasons.append("no layer carries a name CRI-O reads (org.opencontainers.image.title "
                              "or org.cncf.model.filepath): nothing would be mounted")
    tree = Tree()
    for path, (_, layer) in placed.items():
        existing = tree.entries.get(path)
        if existing is not None and existing.type == "dir":
            result.reasons.append(f"{path} is both a file and a directory of other files")
            continue
        try:
            tree.add_file(path, CRIO_BLOB_MODE, layer.size, None)
        except OcibridgeError as e:
            result.reasons.append(str(e))
    result.tree = tree.sorted()
    return result


def _unnamed(i: int, layer: Descriptor) -> str:
    annotations = layer.annotations or {}
    old = Family.CNAI.filepath_key
    if old in annotations:
        return (
            f"layer {i} ({annotations[old]}) is skipped by CRI-O: it reads only "
            f"org.opencontainers.image.title and org.cncf.model.filepath, not {old}"
        )
    return f"layer {i} ({layer.digest}) has no name: CRI-O skips it"


def _is_tar(layer: Descriptor) -> bool:
    kind = parse_layer_media_type(layer.mediaType)
    return (kind is not None and kind.variant.is_tar) or layer.mediaType in TAR_LAYER_TYPES


def _executable(layer: Descriptor) -> bool:
    for family in Family:
        raw = (layer.annotations or {}).get(family.metadata_key)
        if raw:
            try:
                meta = json.loads(raw)
                return bool(int(meta.get("mode", 0)) & 0o111) and int(meta.get("typeflag", 48)) in (0, 48)
            except (ValueError, TypeError, AttributeError):
                return False
    return False


def _image(
    store: Store, sel: Selection, reference: str, rt: Runtime, platform: str, read_layers: bool
) -> CheckResult:
    result = _blank(sel, reference, rt, platform, "image")
    manifest = sel.manifest
    if rt is Runtime.CRIO:
        result.warnings.append("CRI-O treats this reference as an image and unpacks its layers")
    elif manifest.artifactType:
        result.warnings.append(f"containerd ignores artifactType {manifest.artifactType}")
    config_type = manifest.config.mediaType or ""
    if config_type not in IMAGE_CONFIG_TYPES:
        result.reasons.append(
            f"config media type {config_type} is not an image config: {rt.value} mounts only "
            "images (build one with `ocibridge k8s modelcar`)"
        )
    not_tar = [(i, layer.mediaType) for i, layer in enumerate(manifest.layers)
               if layer.mediaType not in TAR_LAYER_TYPES]
    if not_tar:
        i, first = not_tar[0]
        which = f"layer {i} is" if len(not_tar) == 1 else f"{len(not_tar)} of {len(manifest.layers)} layers are"
        result.reasons.append(f"{which} not an image tar layer (layer {i}: {first})")
    config = _image_config(store, manifest, result)
    if config is not None:
        diff_ids = config.rootfs.diff_ids
        if len(diff_ids) != len(manifest.layers):
            result.reasons.append(
                f"config lists {len(diff_ids)} diff_ids for {len(manifest.layers)} layers"
            )
        node = parse_platform(platform)
        have = parse_platform(f"{config.os}/{config.architecture}")
        if not platform_matches(have, node):
            result.warnings.append(
                f"image config says {config.os}/{config.architecture}; a {platform} node may refuse to unpack it"
            )
    if result.reasons or not read_layers or config is None:
        if not read_layers:
            result.warnings.append("layers not read: tree not listed, diff_ids not verified")
        return result
    _unpack(store, manifest, config, result)
    return result


def _image_config(store: Store, manifest: Manifest, result: CheckResult) -> ImageConfig | None:
    if (manifest.config.mediaType or "") not in IMAGE_CONFIG_TYPES:
        return None
    try:
        return ImageConfig.model_validate(json.loads(store.fetch_bytes(manifest.config)))
    except (ValueError, OcibridgeError) as e:
        result.reasons.append(f"image config is unreadable: {str(e).splitlines()[0]}")
        return None


def _unpack(store: Store, manifest: Manifest, config: ImageConfig, result: CheckResult) -> None:
    tree = Tree()
    ok = True
    for i, layer in enumerate(manifest.layers):
        try:
            diff_id = apply_layer(store, layer, tree)
        except (OcibridgeError, OSError, EOFError) as e:
            result.reasons.append(f"layer {i}: {e}")
            return
        except Exception as e:  # tarfile/zstd/gzip raise their own types on corrupt data
            result.reasons.append(f"layer {i} is not a readable tar: {e}")
            return
        if diff_id != config.rootfs.diff_ids[i]:
            ok = False
            result.reasons.append(f"layer {i} diff_id is {diff_id}, the config says {config.rootfs.diff_ids[i]}")
    try:
        tree.finish()  # the links of the whole tree, as mount checks them
    except OcibridgeError as e:
        result.reasons.append(str(e))
        return
    result.diff_ids_verified = ok
    result.tree = tree.sorted()
    top = {e.path.split("/", 1)[0] for e in result.tree}
    if top == {MODELCAR_ROOT} and tree.entries[MODELCAR_ROOT].type == "dir":
        result.sub_path = MODELCAR_ROOT
