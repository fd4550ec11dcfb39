"""``validate`` of an artifact of the early CNAI draft (2024): named as such, never judged by the
current specification's rules it predates.

Plain ``validate`` accepts a well-formed draft artifact with a note saying what it is, how it
differs from the current specification and the command that converts it; ``--strict`` counts
that note as a reason (the artifact does not conform to the current specification). What breaks
the draft's own rules (a layer typed neither way, an ``artifactType`` disagreeing with the
layer's compression, a file path outside the model) is a reason either way.
"""

from __future__ import annotations

from ocibridge.core.fsutil import safe_relpath
from ocibridge.errors import UnsafePath
from ocibridge.oci.cnaidraft import FILEPATH, LAYER_VARIANTS, artifact_kind, is_draft_layer
from ocibridge.oci.mediatypes import OCI_EMPTY, OCI_MANIFEST
from ocibridge.oci.models import Manifest

NAMED = "an artifact of the early CNAI draft (2024)"
CONVERT = "ocibridge convert --to modelpack REF DEST"


def draft_note(manifest: Manifest) -> str:
    """What the draft artifact is, how it differs from the current specification, what to run."""
    config = "the OCI empty descriptor" if manifest.config.mediaType == OCI_EMPTY else \
        f"{manifest.config.mediaType!r}"
    return (f"{NAMED}: its layers are OCI image layers (filesystem changesets) typed by an "
            "artifactType application/vnd.cnai.model.{layer,doc,config}.v1.tar, its config is "
            f"{config} and its metadata org.cnai.model.* manifest annotations; the current "
            "specification types each layer by its own media type (application/vnd.cncf.model."
            "<kind>.v1.<variant>, vnd.cnai before model-spec v0.0.7) and keeps the metadata in a "
            "ModelPack config "
            f"(convert it: {CONVERT})")


def draft_reasons(manifest: Manifest) -> list[str]:
    """The draft's own rules the artifact breaks, each as ``field: rule``."""
    reasons: list[str] = []
    if manifest.mediaType != OCI_MANIFEST:
        reasons.append(f"mediaType: must be {OCI_MANIFEST}, is {manifest.mediaType!r}")
    if not manifest.layers:
        reasons.append("layers: at least one layer is required")
    for i, layer in enumerate(manifest.layers):
        where = f"layers[{i}]"
        if layer.mediaType not in LAYER_VARIANTS:
            reasons.append(f"{where}.mediaType: {layer.mediaType!r} is not an OCI image layer type (the draft's)")
            continue
        if artifact_kind(layer.artifactType) is None:
            reasons.append(f"{where}.artifactType: {layer.artifactType!r} is not one of the draft's "
                           "application/vnd.cnai.model.{layer,doc,config}.v1.tar[+gzip]")
        elif not is_draft_layer(layer) or \
                (layer.artifactType or "").rpartition(".tar")[2] != layer.mediaType.rpartition(".tar")[2]:
            reasons.append(f"{where}.artifactType: {layer.artifactType!r} and mediaType {layer.mediaType!r} "
                           "must agree on compression")
        path = (layer.annotations or {}).get(FILEPATH)
        if path and path != ".":
            try:
                safe_relpath(path)
            except UnsafePath as e:
                reasons.append(f"{where}.annotations.{FILEPATH}: {e}; must be a relative path inside the model")
    return reasons
