"""How CRI-O and containerd decide what an image-volume reference is, before anything is mounted.

Facts (read from the runtimes' sources, not their code): both pick one manifest from an index,
preferring entries whose platform matches the node and falling back to platform-less entries.
CRI-O then treats a manifest as an *image* when its media type is an image manifest, its config
is an image config (or has no media type) and it has no ``artifactType``; anything else is an
*artifact*, whose layer blobs are bind-mounted one file each. containerd only knows images.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ..errors import OcibridgeError
from ..oci.mediatypes import (
    DOCKER_CONFIG,
    DOCKER_LAYER_GZIP,
    DOCKER_MANIFEST,
    OCI_CONFIG,
    OCI_LAYER_TAR,
    OCI_LAYER_TAR_GZIP,
    OCI_LAYER_TAR_ZSTD,
    OCI_MANIFEST,
)
from ..oci.models import Descriptor, Index, Manifest, Platform, parse_manifest_bytes
from ..stores.base import Store

DEFAULT_PLATFORM = "linux/amd64"
#: The only key CRI-O reads besides the OCI title (model-spec's AnnotationFilepath).
CRIO_FILEPATH_KEY = "org.cncf.model.filepath"
TITLE_KEY = "org.opencontainers.image.title"
IMAGE_MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
IMAGE_CONFIG_TYPES = ("", OCI_CONFIG, DOCKER_CONFIG)
DOCKER_LAYER_TAR = "application/vnd.docker.image.rootfs.diff.tar"
#: Layer media types an image unpacker applies, and how each is compressed.
TAR_LAYER_TYPES = {
    OCI_LAYER_TAR: None,
    OCI_LAYER_TAR_GZIP: "gzip",
    OCI_LAYER_TAR_ZSTD: "zstd",
    "application/vnd.oci.image.layer.nondistributable.v1.tar": None,
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip": "gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd": "zstd",
    DOCKER_LAYER_GZIP: "gzip",
    DOCKER_LAYER_TAR: None,
}


class Runtime(str, Enum):
    CRIO = "cri-o"
    CONTAINERD = "containerd"

    @classmethod
    def parse(cls, value: str | Runtime) -> Runtime:
        try:
            return cls(value)
        except ValueError:
            raise OcibridgeError(f"unknown runtime {value!r} (cri-o or containerd)") from None


def parse_platform(text: str) -> Platform:
    """``os/arch[/variant]`` as a Platform."""
    parts = text.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise OcibridgeError(f"invalid platform {text!r} (expected os/arch[/variant])")
    return Platform(os=parts[0], architecture=parts[1], variant=parts[2] if len(parts) == 3 else None)


def platform_matches(have: Platform, want: Platform) -> bool:
    """os and architecture equal; a variant only has to agree where both name one."""
    if have.os != want.os or have.architecture != want.architecture:
        return False
    return not (have.variant and want.variant and have.variant != want.variant)


@dataclass
class Selection:
    """The manifest a runtime ends up with for a reference, and how it got there."""

    top: Descriptor  # what the reference resolves to (maybe an index)
    desc: Descriptor  # the chosen manifest
    manifest: Manifest
    via_index: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def is_image(self) -> bool:
        """CRI-O's rule: image manifest + image (or empty) config media type + no artifactType."""
        return (
            (self.manifest.mediaType or self.desc.mediaType) in IMAGE_MANIFEST_TYPES
            and (self.manifest.config.mediaType or "") in IMAGE_CONFIG_TYPES
            and not self.manifest.artifactType
        )


def choose_from_index(index: Index, platform: Platform) -> Descriptor | None:
    """Platform-matching entries first (in index order), platform-less entries last."""
    fallback = None
    for entry in index.manifests:
        if entry.platform is None:
            fallback = fallback or entry
        elif platform_matches(entry.platform, platform):
            return entry
    return fallback


def select(store: Store, reference: str, platform: str = DEFAULT_PLATFORM) -> Selection:
    """Resolve ``reference`` as a runtime on ``platform`` would, through at most one index."""
    want = parse_platform(platform)
    top = store.resolve(reference)
    doc = parse_manifest_bytes(store.fetch_bytes(top), top.mediaType)
    if isinstance(doc, Manifest):
        return Selection(top, top, doc)
    chosen = choose_from_index(doc, want)
    if chosen is None:
        raise OcibridgeError(f"{reference}: the index has no manifest for {platform} and none without a platform")
    child = parse_manifest_bytes(store.fetch_bytes(chosen), chosen.mediaType)
    if not isinstance(child, Manifest):
        raise OcibridgeError(f"{reference}: nested indexes are not supported by image volumes")
    how = "platform-less entry" if chosen.platform is None else f"entry for {platform}"
    return Selection(top, chosen, child, True, [f"index: the runtime picks the {how} {chosen.digest}"])


def crio_name(desc: Descriptor) -> str | None:
    """The name CRI-O mounts a layer under: the OCI title, else ``org.cncf.model.filepath``."""
    annotations = desc.annotations or {}
    if TITLE_KEY in annotations:
        return annotations[TITLE_KEY]
    return annotations.get(CRIO_FILEPATH_KEY)


def confine(name: str) -> tuple[str, bool]:
    """Where a name lands under the mount path as a secure join puts it: ``..`` never climbs
    above the mount, absolute names become relative. Returns (path, whether it was clamped)."""
    parts: list[str] = []
    clamped = name.startswith("/")
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            else:
                clamped = True
            continue
        parts.append(part)
    return "/".join(parts), clamped
