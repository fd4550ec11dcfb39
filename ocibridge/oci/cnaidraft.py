"""The early CNAI draft (2024): what its layers are, told from their descriptors.

The first model specification of the CNAI group (model-spec's docs/spec.md and
docs/annotations.md of late 2024) typed layers as OCI image layers (``…image.layer.v1.tar``,
``+gzip``) carrying an ``artifactType`` (``application/vnd.cnai.model.layer.v1.tar`` for weights,
``…doc.v1.tar``, ``…config.v1.tar``) and ``org.cnai.model.*`` annotations; each layer is a
filesystem changeset, whiteouts included. The current specification types layers by their own
media types instead, so a reader that knows only those wrote such a layer's tar as one file.
Every reader asks here (layer 0, no imports above) whether a layer is one of the draft's.
"""

from __future__ import annotations

from ocibridge.oci.mediatypes import (
    OCI_LAYER_TAR,
    OCI_LAYER_TAR_GZIP,
    OCI_LAYER_TAR_ZSTD,
    Family,
    Kind,
    LayerType,
    Variant,
)
from ocibridge.oci.models import Descriptor, Manifest

#: the draft's only manifest ``artifactType`` (the current spec's cnai one: told apart by its layers)
MANIFEST_ARTIFACT_TYPE = Family.CNAI.artifact_type
PREFIX = "application/vnd.cnai.model."
ANNOTATION_PREFIX = "org.cnai.model."
README = ANNOTATION_PREFIX + "readme"
LICENSE = ANNOTATION_PREFIX + "license"
FILEPATH = ANNOTATION_PREFIX + "filepath"
#: the image-layer media types the draft uses (``+zstd`` read alike), and how each is compressed
LAYER_VARIANTS = {OCI_LAYER_TAR: Variant.TAR, OCI_LAYER_TAR_GZIP: Variant.TAR_GZIP,
                  OCI_LAYER_TAR_ZSTD: Variant.TAR_ZSTD}
#: the draft's layer artifact types, by the word naming them, and the current kind of each
KINDS = {"layer": Kind.WEIGHT, "doc": Kind.DOC, "config": Kind.WEIGHT_CONFIG}


def artifact_kind(artifact_type: str | None) -> Kind | None:
    """The current kind of a draft layer ``artifactType`` (``…model.doc.v1.tar+gzip`` -> doc)."""
    if not artifact_type or not artifact_type.startswith(PREFIX):
        return None
    word, _, rest = artifact_type[len(PREFIX):].partition(".v1.")
    if word not in KINDS or rest.split("+", 1)[0] != "tar":
        return None
    return KINDS[word]


def is_draft_layer(layer: Descriptor) -> bool:
    """An OCI image tar layer marked as the draft's: a ``vnd.cnai.model.…`` ``artifactType`` or an
    ``org.cnai.model.*`` annotation (a filepath on an image layer names its tar, not a raw file)."""
    if layer.mediaType not in LAYER_VARIANTS:
        return False
    if artifact_kind(layer.artifactType) is not None:
        return True
    return any(key.startswith(ANNOTATION_PREFIX) for key in layer.annotations or {})


def draft_layer_type(layer: Descriptor) -> LayerType | None:
    """The current (family, kind, variant) of a draft layer: the kind from its ``artifactType``
    (or, lacking one, doc for a layer marked readme/license and weight otherwise), the variant
    from its media type (what its bytes really are); None for any other layer."""
    if not is_draft_layer(layer):
        return None
    kind = artifact_kind(layer.artifactType)
    if kind is None:
        annotations = layer.annotations or {}
        flagged = any(annotations.get(key, "").lower() == "true" for key in (README, LICENSE))
        kind = Kind.DOC if flagged else Kind.WEIGHT
    return LayerType(Family.CNAI, kind, LAYER_VARIANTS[layer.mediaType])


def is_draft(manifest: Manifest) -> bool:
    """A manifest of the early draft: the cnai manifest ``artifactType`` over image layers."""
    return manifest.artifactType == MANIFEST_ARTIFACT_TYPE and any(
        layer.mediaType in LAYER_VARIANTS for layer in manifest.layers)
