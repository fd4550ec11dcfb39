"""Media types of OCI, Docker, Ollama and ModelPack, and the two ModelPack naming families.

ModelPack started as ``vnd.cnai`` / ``org.cnai`` and was renamed ``vnd.cncf`` / ``org.cncf`` in
model-spec v0.0.7. Registries such as Harbor still key on the old names, so ``cnai`` is the
default for writing and every reader accepts both.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_EMPTY = "application/vnd.oci.empty.v1+json"
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
OCI_LAYER_TAR_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_LAYER_TAR_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"

OLLAMA_LAYER_PREFIX = "application/vnd.ollama.image."

MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
INDEX_TYPES = (OCI_INDEX, DOCKER_MANIFEST_LIST)
ALL_MANIFEST_TYPES = MANIFEST_TYPES + INDEX_TYPES

ANNOTATION_TITLE = "org.opencontainers.image.title"
ANNOTATION_REF_NAME = "org.opencontainers.image.ref.name"
ANNOTATION_CREATED = "org.opencontainers.image.created"


class Family(str, Enum):
    """The ModelPack naming family: ``cnai`` (original, default) or ``cncf`` (renamed)."""

    CNAI = "cnai"
    CNCF = "cncf"

    @property
    def media_prefix(self) -> str:
        """``application/vnd.<family>.model.``: the start of every media type the family names."""
        return f"application/vnd.{self.value}.model."

    @property
    def key_prefix(self) -> str:
        """``org.<family>.model.``: the start of every annotation key the family names."""
        return f"org.{self.value}.model."

    @property
    def artifact_type(self) -> str:
        return self.media_prefix + "manifest.v1+json"

    @property
    def config_media_type(self) -> str:
        return self.media_prefix + "config.v1+json"

    @property
    def filepath_key(self) -> str:
        return self.annotation("filepath")

    @property
    def metadata_key(self) -> str:
        return self.annotation("file.metadata+json")

    @property
    def untested_key(self) -> str:
        return self.annotation("file.mediatype.untested")

    def annotation(self, name: str) -> str:
        """A family-scoped annotation key such as ``org.cnai.model.carton.hash``."""
        return self.key_prefix + name


class Kind(str, Enum):
    """What a file of a model is, as ModelPack names layer kinds."""

    WEIGHT = "weight"
    WEIGHT_CONFIG = "weight.config"
    DOC = "doc"
    CODE = "code"
    DATASET = "dataset"


class Variant(str, Enum):
    """How a layer carries its files: one raw file, or a tar, optionally compressed."""

    RAW = "raw"
    TAR = "tar"
    TAR_GZIP = "tar+gzip"
    TAR_ZSTD = "tar+zstd"

    @property
    def is_tar(self) -> bool:
        return self is not Variant.RAW


@dataclass(frozen=True)
class LayerType:
    family: Family
    kind: Kind
    variant: Variant
    #: a file format the media type names in place of a variant (``…weight.v1.gguf``), or ""
    named_format: str = ""

    @property
    def media_type(self) -> str:
        return layer_media_type(self.kind, self.variant, self.family)


def layer_media_type(kind: Kind, variant: Variant, family: Family = Family.CNAI) -> str:
    """``application/vnd.<family>.model.<kind>.v1.<variant>``."""
    return f"{family.media_prefix}{kind.value}.v1.{variant.value}"


#: file formats older writers put where the variant goes (Docker Model Runner's
#: ``application/vnd.cncf.model.weight.v1.gguf`` and ``….v1.safetensors``): one raw file each
FORMAT_NAMED_RAW = ("gguf", "safetensors")


def parse_layer_media_type(media_type: str) -> LayerType | None:
    """The family, kind and variant of a ModelPack layer media type, or None for anything else.

    Accepts both families, the seed's bare form without a variant (``…weight.v1``), which
    means raw, and the format-named raw types of :data:`FORMAT_NAMED_RAW`.
    """
    for family in Family:
        prefix = family.media_prefix
        if not media_type.startswith(prefix):
            continue
        rest = media_type[len(prefix):]
        # Longest kind first so that "weight.config" is not read as "weight".
        for kind in sorted(Kind, key=lambda k: -len(k.value)):
            head = f"{kind.value}.v1"
            if rest == head:
                return LayerType(family, kind, Variant.RAW)
            if rest.startswith(head + "."):
                named = rest[len(head) + 1:]
                if named in FORMAT_NAMED_RAW:
                    return LayerType(family, kind, Variant.RAW, named_format=named)
                try:
                    return LayerType(family, kind, Variant(named))
                except ValueError:
                    return None
        return None
    return None


def family_of_artifact(artifact_type: str | None, config_media_type: str | None) -> Family | None:
    """The ModelPack family of a manifest, from its artifactType or its config media type."""
    for family in Family:
        if artifact_type == family.artifact_type or config_media_type == family.config_media_type:
            return family
    return None

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
