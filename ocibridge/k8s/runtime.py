"""How CRI-O and containerd decide what an image-volume reference is, before anything is mounted,
version by version (docs/kubernetes.md cites the runtime source of each rule).

Facts (read from the runtimes' sources, not their code): both pick one manifest from an index,
preferring entries whose platform matches the node and falling back to platform-less entries.
CRI-O 1.33 then decides by shape: an image manifest, an image config media type (or none) and
no ``artifactType`` make an *image*, anything else an *artifact*, whose layer blobs are
bind-mounted one file each, named by title, else ``org.cnai.model.filepath``. CRI-O 1.34 and
later pull an image first (containers/image accepts an OCI manifest only with the OCI config
media type) and take the artifact path when that fails, unless the shape rule calls the manifest
an image (then the pull fails); they name files by title, else ``org.cncf.model.filepath``.
containerd only knows images and does not look at the config media type; it has image volumes
from 2.1 and their subPath from 2.2.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import Enum

from ocibridge.core import boundedjson
from ocibridge.errors import OcibridgeError
from ocibridge.oci.mediatypes import (
    DOCKER_CONFIG,
    DOCKER_MANIFEST,
    OCI_CONFIG,
    OCI_MANIFEST,
)
from ocibridge.oci.models import Descriptor, Index, Manifest, Platform, parse_manifest_bytes
from ocibridge.oci.platform import parse_platform, platform_matches
from ocibridge.stores.base import Store

DEFAULT_PLATFORM = "linux/amd64"
TITLE_KEY = "org.opencontainers.image.title"
IMAGE_MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
IMAGE_CONFIG_TYPES = ("", OCI_CONFIG, DOCKER_CONFIG)


class Runtime(str, Enum):
    CRIO = "cri-o"
    CONTAINERD = "containerd"

    @classmethod
    def parse(cls, value: str | Runtime) -> Runtime:
        return RuntimeVersion.parse(value).runtime


#: The versions ocibridge knows the rules of (read from their sources); a later version is
#: assumed to follow the newest one's. The default is the current release.
KNOWN_VERSIONS = {
    Runtime.CRIO: ((1, 31), (1, 33), (1, 34), (1, 36)),
    Runtime.CONTAINERD: ((1, 6), (1, 7), (2, 0), (2, 1), (2, 2), (2, 3)),
}
DEFAULT_VERSIONS = {Runtime.CRIO: (1, 36), Runtime.CONTAINERD: (2, 3)}
_VERSION_RE = re.compile(r"([0-9]{1,3})\.([0-9]{1,3})(?:\.[0-9]{1,4})?\Z")
#: What ``--runtime`` accepts, for help texts and errors.
RUNTIME_CHOICES = "cri-o[@1.33|@1.34|…] or containerd[@1.6|@1.7|@2.0|@2.1|@2.2|@2.3|…]"


@dataclass(frozen=True)
class RuntimeVersion:
    """A runtime at a minor version; its properties are the rules that version follows."""

    runtime: Runtime
    version: tuple[int, int]

    @classmethod
    def parse(cls, value: str | Runtime | RuntimeVersion) -> RuntimeVersion:
        """``cri-o``, ``cri-o@1.33``, ``containerd@2.1.3`` (the patch release does not matter)."""
        if isinstance(value, RuntimeVersion):
            return value
        name, at, ver = str(value.value if isinstance(value, Runtime) else value).partition("@")
        try:
            runtime = Runtime(name)
        except ValueError:
            raise OcibridgeError(f"unknown runtime {value!r}: {RUNTIME_CHOICES}") from None
        if not at:
            return cls(runtime, DEFAULT_VERSIONS[runtime])
        m = _VERSION_RE.match(ver)
        if m is None:
            raise OcibridgeError(f"runtime version {ver!r} is not MAJOR.MINOR: {RUNTIME_CHOICES}")
        return cls(runtime, (int(m.group(1)), int(m.group(2))))

    @property
    def label(self) -> str:
        return f"{self.runtime.value}@{self.version[0]}.{self.version[1]}"

    def at_least(self, major: int, minor: int) -> bool:
        return self.version >= (major, minor)

    @property
    def has_image_volumes(self) -> bool:
        """CRI-O from 1.31 (KEP-4639 alpha); containerd from 2.1."""
        return self.at_least(1, 31) if self.runtime is Runtime.CRIO else self.at_least(2, 1)

    @property
    def mounts_artifacts(self) -> bool:
        return self.runtime is Runtime.CRIO and self.at_least(1, 33)

    @property
    def pulls_image_first(self) -> bool:
        """CRI-O 1.34+: an image pull first, the artifact path when it fails."""
        return self.runtime is Runtime.CRIO and self.at_least(1, 34)

    @property
    def filepath_key(self) -> str:
        """The model-spec filepath key CRI-O reads after the title: v0.0.4's in 1.33, v0.0.7's later."""
        return "org.cnai.model.filepath" if self.version < (1, 34) else "org.cncf.model.filepath"

    @property
    def family(self) -> str:
        """The ModelPack naming family whose filepath key this version reads (cnai or cncf)."""
        return self.filepath_key.split(".")[1]

    @property
    def has_sub_path(self) -> bool:
        """Image-volume subPath: CRI-O from 1.33, containerd from 2.2."""
        return self.at_least(1, 33) if self.runtime is Runtime.CRIO else self.at_least(2, 2)

    @property
    def beyond_known(self) -> str | None:
        """A note when this version is newer than any whose rules ocibridge read."""
        newest = KNOWN_VERSIONS[self.runtime][-1]
        if self.version <= newest:
            return None
        return (f"{self.label} is newer than the versions ocibridge knows: the rules of "
                f"{self.runtime.value}@{newest[0]}.{newest[1]} are assumed")

    def __str__(self) -> str:
        return self.label


@dataclass
class Selection:
    """The manifest a runtime ends up with for a reference, and how it got there."""

    top: Descriptor  # what the reference resolves to (maybe an index)
    desc: Descriptor  # the chosen manifest
    manifest: Manifest
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


def parse_runtime_manifest(data: bytes, media_type: str | None = None) -> Manifest | Index:
    """Parse as the runtimes do: a config descriptor without ``mediaType`` is read as having
    the empty one (containerd unpacks such an image; CRI-O 1.33 counts it as an image config)."""
    try:
        doc = boundedjson.loads(data)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("config"), dict) and "mediaType" not in doc["config"]:
        doc["config"]["mediaType"] = ""
        data = json.dumps(doc).encode()
    return parse_manifest_bytes(data, media_type)


def select(store: Store, reference: str, platform: str = DEFAULT_PLATFORM) -> Selection:
    """Resolve ``reference`` as a runtime on ``platform`` would, through at most one index."""
    want = parse_platform(platform)
    top = store.resolve(reference)
    doc = parse_runtime_manifest(store.fetch_bytes(top), top.mediaType)
    if isinstance(doc, Manifest):
        return Selection(top, top, doc)
    chosen = choose_from_index(doc, want)
    if chosen is None:
        raise OcibridgeError(f"{reference}: the index has no manifest for {platform} and none without a platform")
    child = parse_runtime_manifest(store.fetch_bytes(chosen), chosen.mediaType)
    if not isinstance(child, Manifest):
        raise OcibridgeError(f"{reference}: nested indexes are not supported by image volumes")
    how = "platform-less entry" if chosen.platform is None else f"entry for {platform}"
    return Selection(top, chosen, child, [f"index: the runtime picks the {how} {chosen.digest}"])


def crio_name(desc: Descriptor, version: RuntimeVersion | None = None) -> str | None:
    """The name CRI-O mounts a layer under: the OCI title when present (an empty one names
    nothing: the layer is skipped, the filepath is not read), else the version's filepath key."""
    annotations = desc.annotations or {}
    key = (version or RuntimeVersion.parse(Runtime.CRIO)).filepath_key
    name = annotations[TITLE_KEY] if TITLE_KEY in annotations else annotations.get(key)
    return name or None
