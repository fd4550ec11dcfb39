"""MLSteam manifest fields → ModelPack descriptor/config and manifest annotations.

Only fields the ModelPack config schema defines go into the config; everything else an
MLSteam manifest says (per-model details, I/O specs, cleanup policy, services, integrity
checks) becomes an ``io.mlsteam.*`` manifest annotation, so registries and ``inspect`` show it
without fetching the manifest layer. The table is in docs/formats/mlsteam.md.
"""

from __future__ import annotations

from typing import Any

from ocibridge.kinds.annotations import annotation_json
from ocibridge.kinds.mlsteam.manifest import MlarchiveManifest

ANNOTATION_PREFIX = "io.mlsteam."
ANNOTATION_SCHEMA = ANNOTATION_PREFIX + "archive.schema"
ANNOTATION_MODELS = ANNOTATION_PREFIX + "models+json"
ANNOTATION_SERVICES = ANNOTATION_PREFIX + "services+json"
ANNOTATION_INTEGRITY = ANNOTATION_PREFIX + "file-integrity-check+json"
ANNOTATION_IN_MEMORY = ANNOTATION_PREFIX + "in-memory-model-extraction"


def _json(value: Any) -> str:
    return annotation_json(value, sort_keys=False)  # mlsteam's keep the order read: their digests too


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def descriptor_of(manifest: MlarchiveManifest) -> dict[str, Any]:
    """name/version from the v2024.1 top level, else the first model; description from the
    model when there is one, else a summary naming all of them."""
    first = manifest.models[0]
    descriptor: dict[str, Any] = {"name": manifest.name or first.name}
    version = manifest.version or first.version
    if version:
        descriptor["version"] = version
    if len(manifest.models) == 1:
        if first.description:
            descriptor["description"] = first.description
    else:
        names = ", ".join(m.name for m in manifest.models)
        descriptor["description"] = f"MLSteam archive of {len(manifest.models)} models: {names}"
    return descriptor


def config_of(manifest: MlarchiveManifest) -> dict[str, Any]:
    """``format`` is the framework; several distinct frameworks are listed comma-separated."""
    frameworks: list[str] = []
    for model in manifest.models:
        if model.framework and model.framework not in frameworks:
            frameworks.append(model.framework)
    return {"format": ",".join(frameworks)} if frameworks else {}


def annotations_of(manifest: MlarchiveManifest) -> dict[str, str]:
    annotations = {
        ANNOTATION_SCHEMA: manifest.schema_version,
        ANNOTATION_MODELS: _json([_dump(m) for m in manifest.models]),
    }
    if manifest.services is not None:
        annotations[ANNOTATION_SERVICES] = _json([_dump(s) for s in manifest.services])
    if manifest.file_integrity_check is not None:
        annotations[ANNOTATION_INTEGRITY] = _json(_dump(manifest.file_integrity_check))
    if manifest.in_memory_model_extraction is not None:
        annotations[ANNOTATION_IN_MEMORY] = str(manifest.in_memory_model_extraction).lower()
    return annotations
