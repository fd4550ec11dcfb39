"""The Ollama manifest: a Docker v2 manifest whose layers are ``application/vnd.ollama.image.*``.

Also accepted: the seed document's form, where parameters ride on the media type
(``…tensor; name=x; dtype=F32; shape=1,2``, ``…config; type=safetensors``) and the config may
be a layer. Unknown fields are kept so that nothing is lost on a round trip.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from ocibridge.core import boundedjson
from ocibridge.errors import SourceError
from ocibridge.oci.digest import is_digest
from ocibridge.oci.mediatypes import DOCKER_CONFIG, DOCKER_MANIFEST, OLLAMA_LAYER_PREFIX

_Model = TypeVar("_Model", bound=BaseModel)


class OllamaLayer(BaseModel):
    model_config = ConfigDict(extra="allow")

    mediaType: str
    digest: str
    size: int = Field(ge=0)
    name: str | None = None
    # ``from`` (the layer's source model) is kept as an extra field.

    @field_validator("digest")
    @classmethod
    def _digest(cls, v: str) -> str:
        if not (is_digest(v) and v.startswith("sha256:")):
            raise ValueError("not a sha256 digest")
        return v


class OllamaManifest(BaseModel):
    model_config = ConfigDict(extra="allow")

    schemaVersion: int | None = None
    mediaType: str | None = None
    config: OllamaLayer | None = None
    layers: list[OllamaLayer]


class OllamaRootFS(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str = "layers"
    diff_ids: list[str] | None = None


class OllamaConfig(BaseModel):
    """The config blob (``application/vnd.docker.container.image.v1+json``), Ollama's ConfigV2.

    ``architecture``/``os`` are the platform (``amd64``/``linux``), not the model's.
    """

    model_config = ConfigDict(extra="allow")

    model_format: str | None = None
    model_family: str | None = None
    model_families: list[str] | None = None
    model_type: str | None = None  # the parameter size, e.g. "8.0B"
    file_type: str | None = None  # the quantization, e.g. "Q4_K_M"
    requires: str | None = None
    capabilities: list[str] | None = None
    context_length: int | None = None
    architecture: str | None = None
    os: str | None = None
    rootfs: OllamaRootFS | None = None


def _json_object(data: bytes, where: str) -> dict[str, Any]:
    """The JSON object ``data`` holds; anything else is one ``SourceError`` naming ``where``."""
    try:
        doc = boundedjson.loads(data)
    except ValueError as e:
        raise SourceError(f"{where} is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise SourceError(f"{where} is not a JSON object")
    return doc


def _validated(model: type[_Model], doc: dict[str, Any], where: str) -> _Model:
    """``doc`` as ``model``; the first problem becomes one line naming its location."""
    try:
        return model.model_validate(doc)
    except PydanticValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise SourceError(f"malformed {where}: {loc}: {first['msg']}") from None


def parse_ollama_config(data: bytes, where: str = "Ollama config") -> OllamaConfig:
    return _validated(OllamaConfig, _json_object(data, where), where)


@dataclass(frozen=True)
class LayerType:
    """``application/vnd.ollama.image.tensor; name=a; dtype=F32`` → kind ``tensor`` + params."""

    kind: str
    params: dict[str, str] = field(default_factory=dict)


def parse_layer_type(media_type: str) -> LayerType | None:
    """The Ollama kind and media-type parameters, or None for a non-Ollama media type."""
    base, *raw_params = (p.strip() for p in media_type.split(";"))
    if not base.startswith(OLLAMA_LAYER_PREFIX):
        return None
    params: dict[str, str] = {}
    for item in raw_params:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SourceError(f"malformed media type parameter {item!r} in {media_type!r}")
        params[key.strip().lower()] = value.strip().strip('"')
    return LayerType(base[len(OLLAMA_LAYER_PREFIX):], params)


def parse_ollama_manifest(data: bytes, where: str = "Ollama manifest") -> OllamaManifest:
    """Parse and check a manifest: every layer an Ollama layer, config (if any) a Docker config."""
    doc = _json_object(data, where)
    if doc.get("artifactType") or "manifests" in doc:
        raise SourceError(f"{where} is not an Ollama model manifest (an OCI artifact or index)")
    manifest = _validated(OllamaManifest, doc, where)
    if manifest.mediaType not in (None, DOCKER_MANIFEST):
        raise SourceError(f"{where} has media type {manifest.mediaType}, not a Docker v2 manifest")
    if manifest.config is not None and manifest.config.mediaType != DOCKER_CONFIG:
        raise SourceError(f"{where}: config media type {manifest.config.mediaType} is not Ollama's")
    if not manifest.layers:
        raise SourceError(f"{where} has no layers")
    for layer in manifest.layers:
        if parse_layer_type(layer.mediaType) is None:
            raise SourceError(f"{where}: layer media type {layer.mediaType!r} is not an Ollama one")
    return manifest


def manifest_blobs(manifest: OllamaManifest) -> list[OllamaLayer]:
    """Config then layers, each digest once."""
    seen: dict[str, OllamaLayer] = {}
    for blob in ([manifest.config] if manifest.config else []) + manifest.layers:
        seen.setdefault(blob.digest, blob)
    return list(seen.values())


def go_json(value: Any) -> bytes:
    """JSON as Go's encoding/json writes it: compact, keys in the given order, HTML-escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return text.encode()


def render_manifest(config: dict[str, Any], layers: list[dict[str, Any]]) -> bytes:
    """A manifest as Ollama writes its manifest files (json.Encoder: compact + newline)."""
    doc = {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "config": config, "layers": layers}
    return go_json(doc) + b"\n"
