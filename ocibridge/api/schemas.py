"""JSON Schemas generated from the wire models; ``python -m ocibridge.api.schemas DIR`` rewrites
``schemas/`` and a test fails when the committed files fall behind the models.

The OCI documents are described once, by the plain dataclasses of :mod:`ocibridge.oci.models`
that every command reads them with; pydantic's ``TypeAdapter`` makes their schemas here, so
pydantic is imported only by this module, never on a command's path. The ModelPack config and
the mirror job are pydantic models of their own.

It sits in ``api/`` because it gathers wire models from every layer (the mirror job's included),
named by import rather than by string so that the layering test sees each edge."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import core_schema

from ocibridge.mirror.job import MirrorJob
from ocibridge.model.config import ModelPackConfig
from ocibridge.oci import models as wire

#: a pydantic model, or a dataclass of ocibridge.oci.models
MODELS: dict[str, type[object]] = {
    "modelpack-config": ModelPackConfig,
    "oci-descriptor": wire.Descriptor,
    "oci-manifest": wire.Manifest,
    "oci-index": wire.Index,
    "oci-image-config": wire.ImageConfig,
    "mirror-job": MirrorJob,
}


class _WireSchema(GenerateJsonSchema):
    """pydantic's generator, but a wire dataclass's ``model_extra`` (where the fields it does not
    name are kept) is no field of the document: the schema says ``additionalProperties`` instead."""

    def field_is_present(self, field: core_schema.DataclassField | core_schema.ModelField
                         | core_schema.TypedDictField | core_schema.ComputedField) -> bool:
        return super().field_is_present(field) and field.get("name") != "model_extra"


def json_schema(model: type[object]) -> dict[str, Any]:
    """The JSON Schema of one wire model (a pydantic model, or an OCI dataclass)."""
    if issubclass(model, BaseModel):
        return model.model_json_schema(by_alias=True)
    return TypeAdapter(model).json_schema(by_alias=True, schema_generator=_WireSchema)


def generate() -> dict[str, dict[str, Any]]:
    out = {}
    for name, model in sorted(MODELS.items()):
        schema = json_schema(model)
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        schema["$id"] = f"https://ocibridge.dev/schemas/{name}.schema.json"
        out[name] = schema
    return out


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in generate().items():
        path = directory / f"{name}.schema.json"
        path.write_text(render(schema))
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "schemas")
    for p in write(target):
        print(p)
