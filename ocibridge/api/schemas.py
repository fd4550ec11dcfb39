"""JSON Schemas generated from the pydantic wire models; ``python -m ocibridge.api.schemas DIR``
rewrites ``schemas/`` and a test fails when the committed files fall behind the models.

It sits in ``api/`` because it gathers wire models from every layer (the mirror job's included),
named by import rather than by string so that the layering test sees each edge."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ocibridge.mirror.job import MirrorJob
from ocibridge.model.config import ModelPackConfig
from ocibridge.oci.schema_models import Descriptor, ImageConfig, Index, Manifest

MODELS: dict[str, type[BaseModel]] = {
    "modelpack-config": ModelPackConfig,
    "oci-descriptor": Descriptor,
    "oci-manifest": Manifest,
    "oci-index": Index,
    "oci-image-config": ImageConfig,
    "mirror-job": MirrorJob,
}

def generate() -> dict[str, dict[str, Any]]:
    out = {}
    for name, model in sorted(MODELS.items()):
        schema = model.model_json_schema(by_alias=True)
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
