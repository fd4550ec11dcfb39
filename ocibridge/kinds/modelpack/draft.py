"""An artifact of the early CNAI draft (2024) read as a current ModelPack artifact.

The draft's layers are filesystem changesets (OCI image layers: a later layer's whiteout deletes
an earlier layer's file), so its files are only known once every layer is laid over the ones
below: they are pulled into a staging directory (the one directory target, which applies them
in order) and packed again as push packs a directory, each file of the kind its layer's
``artifactType`` says. The metadata of the ``org.cnai.model.*`` manifest annotations goes into the
config where it has a place (:data:`TO_CONFIG`), then what push infers from the files fills the
rest; every other annotation stays a manifest annotation, so nothing is dropped unsaid.
docs/formats/cnai-draft.md is the table of this mapping.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.core.fsutil import TEMP_PREFIX
from ocibridge.errors import ValidationError
from ocibridge.kinds.neutral import Loss
from ocibridge.kinds.overrides import field_value, section_of
from ocibridge.oci.cnaidraft import ANNOTATION_PREFIX, FILEPATH, LICENSE, README
from ocibridge.oci.layerinfo import layer_type
from ocibridge.oci.mediatypes import Kind
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import Store

if TYPE_CHECKING:
    from ocibridge.model.builder import ArtifactStore

#: draft manifest annotation (after ``org.cnai.model.``) -> the ModelPack field it fills (its section: section_of)
TO_CONFIG: dict[str, str] = {
    "created": "createdAt",
    "authors": "authors",
    "documentation": "docURL",
    "source": "sourceURL",
    "version": "version",
    "revision": "revision",
    "vendor": "vendor",
    "licenses": "licenses",
    "title": "title",
    "description": "description",
    "family": "family",
    "name": "name",
    "architecture": "architecture",
    "format": "format",
    "param.size": "paramSize",
    "precision": "precision",
    "quantization": "quantization",
}
_ANY_DIGEST = "sha256:" + "0" * 64  # a diffId, for checking one field's value alone
#: layer annotations the current form says otherwise: the path of the files, the kind doc
LAYER_KEYS = (FILEPATH, README, LICENSE)


def metadata(annotations: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(descriptor, config, annotations kept): each draft annotation with a config place moved
    there, unless the strict config model refuses its value (then it stays an annotation)."""
    from ocibridge.model.config import parse_config

    sections: dict[str, dict[str, Any]] = {"descriptor": {}, "config": {}}
    kept = dict(annotations)
    for name, field in TO_CONFIG.items():
        value = annotations.get(ANNOTATION_PREFIX + name)
        if value is None or not value.strip():
            continue
        section, candidate = section_of(field), field_value(field, value)
        try:  # one field at a time: a bad value stays where it was, the others still move
            parse_config({"descriptor": {}, "config": {}, section: {field: candidate},
                          "modelfs": {"type": "layers", "diffIds": [_ANY_DIGEST]}})
        except ValidationError:
            continue
        sections[section][field] = candidate
        del kept[ANNOTATION_PREFIX + name]
    return sections["descriptor"], sections["config"], kept


def read_draft(store: Store, desc: Descriptor, manifest: Manifest) -> tuple[ArtifactStore, list[Loss]]:
    """The draft artifact ``desc`` as the ModelPack artifact push would build of its files (a
    read-only store, its staged files removed with it), and what the current form says otherwise."""
    from ocibridge.model import metadata as inferred
    from ocibridge.model.builder import build
    from ocibridge.model.extract import extract

    staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
    try:
        pulled = extract(store, desc.digest, staging / "files")
        kinds = {layer.digest: _kind(layer) for layer in manifest.layers}
        package = _package(staging / "files", pulled.files, {p: kinds[d] for p, d in pulled.origins.items()},
                           dict(manifest.annotations or {}))
        inferred.fill(package)
        artifact = build(package)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    import weakref

    weakref.finalize(artifact, shutil.rmtree, str(staging), True)
    return artifact, _losses(manifest, len(pulled.files))


def _kind(layer: Descriptor) -> Kind:
    found = layer_type(layer)
    return found.kind if found is not None else Kind.WEIGHT


def _package(root: Path, files: list[str], kinds: dict[str, Kind], annotations: dict[str, str]) -> Any:
    from ocibridge.model.classify import classify
    from ocibridge.model.package import ModelFile, ModelPackage

    descriptor, config, kept = metadata(annotations)
    entries = []
    for rel in files:
        path = root / rel
        kind = kinds.get(rel) or classify(rel, 0)
        if path.is_symlink():
            entries.append(ModelFile(rel, kind, 0, link_target=str(path.readlink())))
        else:
            entries.append(ModelFile.from_path(rel, path, kind))
    return ModelPackage(files=entries, descriptor=descriptor, config=config, annotations=kept,
                        source_format="cnai-draft")


def _losses(manifest: Manifest, files: int) -> list[Loss]:
    """What the current form says otherwise: the changeset layers became new layers of the
    files they leave, the layers' own annotations became paths and kinds."""
    losses = [Loss("layers", f"an artifact of the early CNAI draft (2024): its {len(manifest.layers)} changeset "
                   f"layers, laid over one another, packed again as the {files} files they leave (new blobs)",
                   False)]
    for i, layer in enumerate(manifest.layers):
        for key, value in sorted((layer.annotations or {}).items()):
            said = "its files' paths" if key == FILEPATH else "the kind doc" if key in (README, LICENSE) else None
            losses.append(Loss(f"layers[{i}].annotations[{key}]", value if said is None else f"{value} (as {said})",
                               False))
    return losses
