"""``k8s check``: will this reference mount as an image volume, and what will the pod see?

CRI-O mounts an *artifact* by bind-mounting every named layer blob as one file; it mounts an
*image* (and containerd mounts only images) by unpacking its tar layers. The result lists the
exact tree at the mount path and every reason it would not mount, in one line each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.core.confined import MAX_LINK_HOPS
from ocibridge.errors import OcibridgeError
from ocibridge.k8s.runtime import (
    DEFAULT_PLATFORM,
    IMAGE_MANIFEST_TYPES,
    TITLE_KEY,
    Runtime,
    RuntimeVersion,
    Selection,
    crio_name,
    select,
)
from ocibridge.layers.apply import Tree, TreeEntry, apply_layer, confine
from ocibridge.layers.reader import UnreadableLayer
from ocibridge.oci.mediatypes import (
    DOCKER_CONFIG,
    DOCKER_MANIFEST,
    OCI_CONFIG,
    OCI_MANIFEST,
    TAR_LAYER_TYPES,
    Family,
    parse_layer_media_type,
)
from ocibridge.oci.models import Descriptor, ImageConfig, Manifest
from ocibridge.oci.platform import parse_platform, platform_matches
from ocibridge.stores.base import Store

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
    version: RuntimeVersion | None = None  # the runtime version whose rules were applied
    layers: list[str] = field(default_factory=list)  # per layer: what this version does with it

    def to_json(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "runtime": self.runtime.value,
            "runtimeVersion": self.version.label.split("@", 1)[1] if self.version else None,
            "platform": self.platform,
            "manifest": self.manifest.digest,
            "kind": self.kind,
            "willMount": self.will_mount,
            "subPath": self.sub_path,
            "diffIdsVerified": self.diff_ids_verified,
            "layersHidden": self.layers_hidden,
            "reasons": self.reasons,
            "warnings": self.warnings,
            "layers": self.layers,
            "tree": [e.to_json() for e in self.tree],
        }


def check(
    store: Store,
    reference: str,
    runtime: str | Runtime | RuntimeVersion,
    *,
    platform: str = DEFAULT_PLATFORM,
    read_layers: bool = True,
) -> CheckResult:
    """Decide as ``runtime`` (``cri-o@1.33``, ``containerd``…) on ``platform`` would. For images
    every layer is read once (digest and diff_id checked, tree listed) unless ``read_layers`` is
    False."""
    rv = RuntimeVersion.parse(runtime)
    sel = select(store, reference, platform)
    notes = list(sel.notes)
    if rv.beyond_known:
        notes.append(rv.beyond_known)
    refusal = image_pull_refusal(sel.manifest, sel.desc)
    crio = rv.runtime is Runtime.CRIO
    if crio and not sel.is_image and (refusal is not None or not rv.pulls_image_first):
        # not an image by its shape: the artifact path, at once (1.33) or once the image pull failed
        if rv.pulls_image_first:
            notes.append(f"{rv.label} tries an image pull first, which fails ({refusal}); "
                         "it falls back to the artifact path")
        result = _crio_artifact(sel, reference, platform, rv)
        if not rv.mounts_artifacts:
            result.reasons.insert(0, f"{rv.label} mounts only images (artifacts from CRI-O 1.33)")
    else:
        # an image pull; a CRI-O 1.34+ pull that fails falls back to the artifact path unless the
        # artifact path takes the manifest for an image by its shape (then the pull just fails)
        untyped = crio and any(d.mediaType not in TAR_LAYER_TYPES for d in sel.manifest.layers)
        may_fall_back = crio and rv.pulls_image_first and not sel.is_image
        result = _image(store, sel, reference, rv, platform, read_layers or untyped or may_fall_back)
        if crio and refusal is not None:
            result.reasons.insert(0, f"containers/image refuses it as an image ({refusal}), and {rv.label} "
                                     "takes it for an image by its shape: the pull fails")
        elif may_fall_back and result.reasons:
            notes.append(f"{rv.label} tries an image pull first, which fails ({result.reasons[0]}); "
                         "it falls back to the artifact path")
            result = _crio_artifact(sel, reference, platform, rv)
    if not rv.has_image_volumes:
        first = "2.1" if rv.runtime is Runtime.CONTAINERD else "1.31"
        result.reasons.insert(0, f"{rv.label} has no image volumes ({rv.runtime.value} {first} or later)")
    result.version = rv
    result.warnings[:0] = notes
    result.will_mount = not result.reasons
    return result


def image_pull_refusal(manifest: Manifest, desc: Descriptor) -> str | None:
    """Why containers/image (CRI-O's image pull, podman's) would not pull this as an image, or
    None: an OCI manifest needs the OCI config media type, a Docker one the Docker config. Layer
    media types are not checked: the content is unpacked as a tar whatever they say."""
    kind = manifest.mediaType or desc.mediaType
    config_type = manifest.config.mediaType or ""
    if kind == OCI_MANIFEST and config_type != OCI_CONFIG:
        return f"config media type {config_type or '(none)'!s} in an OCI manifest"
    if kind == DOCKER_MANIFEST and config_type != DOCKER_CONFIG:
        return f"config media type {config_type or '(none)'!s} in a Docker manifest"
    if kind not in IMAGE_MANIFEST_TYPES:
        return f"{kind} is not an image manifest"
    return None


def _blank(sel: Selection, reference: str, rt: Runtime, platform: str, kind: str) -> CheckResult:
    return CheckResult(reference, rt, platform, sel.desc, kind, False)


def _crio_artifact(sel: Selection, reference: str, platform: str, rv: RuntimeVersion) -> CheckResult:
    result = _blank(sel, reference, Runtime.CRIO, platform, "artifact")
    placed: dict[str, tuple[int, Descriptor]] = {}
    wrong_family = 0
    tars = 0
    for i, layer in enumerate(sel.manifest.layers):
        name = crio_name(layer, rv)
        tars += _is_tar(layer)
        if name is None:
            message, other_name = _unnamed(i, layer, rv)
            result.warnings.append(message)
            result.layers.append(f"layer {i}: skipped")
            result.layers_hidden += 1
            # the other family would help a raw file only: a tar would be mounted as one file
            wrong_family += bool(other_name and confine(other_name)[0] and not _is_tar(layer))
            continue
        path, clamped = confine(name)
        if not path:
            result.reasons.append(f"layer {i} is named {name!r}, which is the mount path itself")
            result.layers.append(f"layer {i}: over the mount path itself")
            continue
        if clamped:
            result.warnings.append(
                f"layer {i} name {name!r} escapes the mount; CRI-O confines it to {path}"
            )
        how = "title" if TITLE_KEY in (layer.annotations or {}) else rv.filepath_key
        tar = _is_tar(layer)
        result.layers.append(f"layer {i}: bind-mounted as the file {path} (named by {how})"
                             + (", not unpacked" if tar else ""))
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
    if wrong_family:
        other = "cncf" if rv.family == "cnai" else "cnai"
        result.warnings.append(
            f"this artifact names files with org.{other}.model.filepath, which {rv.label} does not read: "
            f"push it with --media-types {rv.family} for {rv.label}"
            + (" (CRI-O 1.34 and later read cncf)" if rv.family == "cnai" else " (CRI-O 1.33 reads cnai)")
        )
    if tars:
        result.warnings.append(
            f"{tars} tar layer(s): CRI-O mounts none of their files under any naming; a ModelCar "
            "image (`ocibridge k8s modelcar`) mounts them all"
        )
    if not placed and not result.reasons:
        result.reasons.append(f"no layer carries a name {rv.label} reads (org.opencontainers.image.title "
                              f"or {rv.filepath_key}): nothing would be mounted")
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


def _unnamed(i: int, layer: Descriptor, rv: RuntimeVersion) -> tuple[str, str | None]:
    """The warning for a layer CRI-O skips, and the name the other family's filepath gives it."""
    annotations = layer.annotations or {}
    if annotations.get(TITLE_KEY) == "":
        return f"layer {i} ({layer.digest}) has an empty title: {rv.label} skips it", None
    for family in Family:
        key = family.filepath_key
        if key != rv.filepath_key and annotations.get(key):
            return (
                f"layer {i} ({annotations[key]}) is skipped by {rv.label}: it reads only "
                f"org.opencontainers.image.title and {rv.filepath_key}, not {key}"
            ), annotations[key]
    return f"layer {i} ({layer.digest}) has no name: {rv.label} skips it", None


def _is_tar(layer: Descriptor) -> bool:
    kind = parse_layer_media_type(layer.mediaType)
    return (kind is not None and kind.variant.is_tar) or layer.mediaType in TAR_LAYER_TYPES


def _executable(layer: Descriptor) -> bool:
    for family in Family:
        raw = (layer.annotations or {}).get(family.metadata_key)
        if raw:
            try:
                meta = boundedjson.loads(raw)
                return bool(int(meta.get("mode", 0)) & 0o111) and int(meta.get("typeflag", 48)) in (0, 48)
            except (ValueError, TypeError, AttributeError):
                return False
    return False


def _image(
    store: Store, sel: Selection, reference: str, rv: RuntimeVersion, platform: str, read_layers: bool
) -> CheckResult:
    rt = rv.runtime
    result = _blank(sel, reference, rt, platform, "image")
    manifest = sel.manifest
    not_tar = [(i, layer.mediaType) for i, layer in enumerate(manifest.layers)
               if layer.mediaType not in TAR_LAYER_TYPES]
    if rt is Runtime.CRIO and not_tar:  # containers/image unpacks whatever the type says
        result.warnings.extend(f"layer {i} has media type {mt}: CRI-O unpacks its content as a tar anyway"
                               for i, mt in not_tar)
        not_tar = []
    if rt is Runtime.CRIO:
        result.warnings.append(f"{rv.label} treats this reference as an image and unpacks its layers")
    else:
        if manifest.artifactType:
            result.warnings.append(f"containerd ignores artifactType {manifest.artifactType}")
        if not not_tar and (refusal := image_pull_refusal(manifest, sel.desc)) is not None:
            result.warnings.append(
                f"containerd does not check the config media type ({refusal}); CRI-O and podman "
                "refuse it: push the config as application/vnd.oci.image.config.v1+json"
            )
    if not_tar:
        i, first = not_tar[0]
        which = f"layer {i} is" if len(not_tar) == 1 else f"{len(not_tar)} of {len(manifest.layers)} layers are"
        result.reasons.append(
            f"{which} not an image tar layer (layer {i}: {first}): {rt.value} mounts only images "
            "(build one with `ocibridge k8s modelcar`)"
        )
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
    _unpack(store, manifest, config, result, Tree(fresh_parents=rt is Runtime.CRIO))
    if result.sub_path and not rv.has_sub_path:
        result.warnings.append(
            f"{rv.label} has no image-volume subPath (containerd 2.2 or later): the files are at "
            f"<mountPath>/{result.sub_path}"
        )
        result.sub_path = None
    return result


def _image_config(store: Store, manifest: Manifest, result: CheckResult) -> ImageConfig | None:
    """The config read as an image config, whatever its media type says (as containerd does)."""
    try:
        return ImageConfig.model_validate(boundedjson.loads(store.fetch_bytes(manifest.config)))
    except (ValueError, OcibridgeError) as e:
        result.reasons.append(f"image config is unreadable: {str(e).splitlines()[0]}")
        return None


def _unpack(store: Store, manifest: Manifest, config: ImageConfig, result: CheckResult, tree: Tree) -> None:
    ok = True
    for i, layer in enumerate(manifest.layers):
        try:
            before = len(tree.entries)
            diff_id = apply_layer(store, layer, tree)
            result.layers.append(f"layer {i}: unpacked ({len(tree.entries) - before:+d} paths)")
        except UnreadableLayer as e:  # corrupt gzip/zstd, or not a tar
            result.reasons.append(f"layer {i} is not a readable tar: {e.cause}")
            return
        except (OcibridgeError, OSError, EOFError) as e:
            result.reasons.append(f"layer {i}: {e}")
            return
        except Exception as e:  # a decoder's own error type that readable_layer does not know
            result.reasons.append(f"layer {i} is not a readable tar: {e}")
            return
        if diff_id != config.rootfs.diff_ids[i]:
            ok = False
            result.reasons.append(f"layer {i} diff_id is {diff_id}, the config says {config.rootfs.diff_ids[i]}")
    for name, path in tree.confined:
        result.warnings.append(f"tar entry {name!r} climbs out of the image or is absolute: the runtime "
                               f"writes it at {path or '/'}")
    for path, (target, why) in tree.links_leaving().items():
        what = ("is a loop or a chain of more than 40 links" if f"more than {MAX_LINK_HOPS} links" in why
                else "points outside the mount")
        result.warnings.append(f"{path} -> {target} {what}: the runtime keeps it, and in the pod it "
                               "resolves against the container's own files")
    result.diff_ids_verified = ok
    result.tree = tree.sorted()
    result.warnings.extend(
        f"{e.path} is a device node ({e.type} {e.target}): the runtime creates it in the volume "
        "(k8s mount does not)" for e in result.tree if e.type in ("chardev", "blockdev"))
    top = {e.path.split("/", 1)[0] for e in result.tree}
    if top == {MODELCAR_ROOT} and tree.entries[MODELCAR_ROOT].type == "dir":
        result.sub_path = MODELCAR_ROOT
