"""``carton.toml`` fields → ModelPack descriptor/config and ``io.carton.*`` manifest annotations.

Only fields the ModelPack config schema defines go into the config; the rest (runner details,
platforms, tensor specs) become manifest annotations under the neutral ``io.carton.`` prefix,
which does not depend on the ModelPack naming family chosen at build time. The model hash
annotation lets an artifact be found by its Carton model hash. Table: docs/formats/carton.md.
"""

from __future__ import annotations

from typing import Any

from ocibridge.kinds.annotations import annotation_json
from ocibridge.kinds.carton.carton_toml import CartonToml

ANNOTATION_PREFIX = "io.carton."
ANNOTATION_MODEL_HASH = ANNOTATION_PREFIX + "model.hash"


def _json(value: Any) -> str:
    return annotation_json(value, sort_keys=True)  # carton's annotations have always sorted keys


def descriptor_of(toml: CartonToml) -> dict[str, Any]:
    """name, description (the short one if there is one), licenses, sourceURL, docURL."""
    descriptor: dict[str, Any] = {}
    if toml.model_name:
        descriptor["name"] = toml.model_name
    description = toml.short_description or toml.model_description
    if description:
        descriptor["description"] = description
    if toml.license:
        descriptor["licenses"] = [toml.license]
    if toml.repository:
        descriptor["sourceURL"] = toml.repository
    if toml.homepage:
        descriptor["docURL"] = toml.homepage
    return descriptor


def config_of(toml: CartonToml) -> dict[str, Any]:
    """The runner decides how the model files are read, which is what ``format`` says."""
    return {"format": toml.runner.runner_name}


def annotations_of(toml: CartonToml, model_hash: str) -> dict[str, str]:
    """The ``io.carton.*`` annotations, each key written where its value is (docs/formats/carton.md's
    table); only the model hash, which the exporter and lookups read back, has a name of its own."""
    runner = toml.runner
    annotations = {
        ANNOTATION_MODEL_HASH: model_hash,
        ANNOTATION_PREFIX + "spec-version": str(toml.spec_version),
        ANNOTATION_PREFIX + "runner.name": runner.runner_name,
        ANNOTATION_PREFIX + "runner.required-framework-version": runner.required_framework_version,
    }
    if runner.runner_compat_version is not None:
        annotations[ANNOTATION_PREFIX + "runner.compat-version"] = str(runner.runner_compat_version)
    if runner.opts:
        annotations[ANNOTATION_PREFIX + "runner.opts+json"] = _json(runner.opts)
    if toml.required_platforms:
        annotations[ANNOTATION_PREFIX + "required-platforms+json"] = _json(toml.required_platforms)
    if toml.input is not None:
        annotations[ANNOTATION_PREFIX + "inputs+json"] = _json([t.model_dump(exclude_none=True) for t in toml.input])
    if toml.output is not None:
        annotations[ANNOTATION_PREFIX + "outputs+json"] = _json([t.model_dump(exclude_none=True) for t in toml.output])
    if toml.short_description and toml.model_description:
        annotations[ANNOTATION_PREFIX + "model-description"] = toml.model_description
    return annotations
