"""Docker Model Runner artifacts: config ``application/vnd.docker.ai.model.config.v0.1+json``
(v0.2 for nested paths), one raw layer per file typed by what it is (GGUF, safetensors,
license, chat template, ...), directories as uncompressed tar layers.

Kinds follow Docker's own ModelPack conversion (``pkg/distribution/modelpack/convert.go``):
weights and projectors → weight, license → doc, templates, config archives and other model
files → weight.config; ``family`` is the architecture and ``paramSize`` the parameter count in
lower case.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any

from ocibridge.errors import SourceError
from ocibridge.kinds.common import (
    EPOCH_ZERO,
    compact_json,
    fetch_json,
    layer_file_path,
    layer_metadata,
    section,
    short,
    text_field,
)
from ocibridge.kinds.family import Reading, WriteOptions
from ocibridge.kinds.neutral import Loss, ModelView, Part, Written
from ocibridge.kinds.origin import can_keep, carried, strip
from ocibridge.oci.mediatypes import OCI_MANIFEST, Kind, Variant
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import Store

CONFIG_V01 = "application/vnd.docker.ai.model.config.v0.1+json"
CONFIG_V02 = "application/vnd.docker.ai.model.config.v0.2+json"
CONFIG_TYPES = (CONFIG_V01, CONFIG_V02)
PREFIX = "application/vnd.docker.ai."
GGUF = PREFIX + "gguf.v3"
SAFETENSORS = PREFIX + "safetensors"
DDUF = PREFIX + "dduf"
MMPROJ = PREFIX + "mmproj"
LICENSE = PREFIX + "license"
CHAT_TEMPLATE = PREFIX + "chat.template.jinja"
MODEL_FILE = PREFIX + "model.file"
VLLM_CONFIG_TAR = PREFIX + "vllm.config.tar"
DIR_TAR = PREFIX + "dir.tar"
FILEPATH = "org.cncf.model.filepath"
METADATA = "org.cncf.model.file.metadata+json"
UNTESTED = "org.cncf.model.file.mediatype.untested"

#: media type → (kind, role, variant, default file name when the layer has no path annotation)
_LAYERS: dict[str, tuple[Kind, str, Variant, str]] = {
    GGUF: (Kind.WEIGHT, "gguf", Variant.RAW, "model.gguf"),
    SAFETENSORS: (Kind.WEIGHT, "safetensors", Variant.RAW, "model.safetensors"),
    DDUF: (Kind.WEIGHT, "dduf", Variant.RAW, "model.dduf"),
    MMPROJ: (Kind.WEIGHT, "mmproj", Variant.RAW, "model.mmproj"),
    LICENSE: (Kind.DOC, "license", Variant.RAW, "LICENSE"),
    CHAT_TEMPLATE: (Kind.WEIGHT_CONFIG, "chat-template", Variant.RAW, "template.jinja"),
    MODEL_FILE: (Kind.WEIGHT_CONFIG, "model-file", Variant.RAW, "model.file"),
    VLLM_CONFIG_TAR: (Kind.WEIGHT_CONFIG, "vllm-config", Variant.TAR, "."),
    DIR_TAR: (Kind.WEIGHT_CONFIG, "dir-tar", Variant.TAR, "."),
}
_ROLE_TYPES = {role: media_type for media_type, (_, role, _, _) in _LAYERS.items()}
_LICENSE_NAME = re.compile(r"(^|/)(license|licence|copying|notice)([^/]*)$", re.I)
_EXTRA_FIELDS = ("size", "gguf", "safetensors", "diffusers", "context_size")


def _numbered(name: str, n: int) -> str:
    if n <= 1:
        return name
    stem, dot, ext = name.partition(".")
    return f"{stem}-{n}{dot}{ext}"


class DockerModelFamily:
    name = "docker-model"
    title = "Docker model artifact"

    def matches(self, manifest: Manifest) -> bool:
        return manifest.config.mediaType in CONFIG_TYPES

    def key(self, manifest: Manifest | None, options: WriteOptions) -> str:
        return self.name

    def read(self, store: Store, desc: Descriptor, data: bytes, manifest: Manifest) -> Reading:
        config_bytes, doc = fetch_json(store, manifest.config, "Docker model config")
        cfg = section(doc, "config")
        parts: list[Part] = []
        used: dict[str, int] = {}
        for layer in manifest.layers:
            known = _LAYERS.get(layer.mediaType)
            if known is None:
                raise SourceError(f"layer {layer.digest}: {layer.mediaType!r} is not a Docker model layer type")
            kind, role, variant, default = known
            path = layer_file_path(layer)
            if path is None:  # v0.1 artifacts written before file path annotations
                used[default] = used.get(default, 0) + 1
                path = _numbered(default, used[default])
            meta, mode = layer_metadata(layer)
            parts.append(Part(layer, kind, variant, path, layer.digest, role=role, mode=mode, file_metadata=meta))
        descriptor: dict[str, Any] = {}
        created = text_field(doc, "descriptor", "created")
        if created:
            descriptor["createdAt"] = created
        architecture = text_field(cfg, "architecture")
        if architecture:
            descriptor["family"] = architecture
        config: dict[str, Any] = {}
        for field, key in (("architecture", "architecture"), ("format", "format"),
                           ("paramSize", "parameters"), ("quantization", "quantization")):
            value = text_field(cfg, key)
            if value:
                config[field] = value.lower() if field == "paramSize" else value
        extra = {f"docker.{k}": cfg[k] for k in _EXTRA_FIELDS if cfg.get(k) not in (None, "", {})}
        view = ModelView(
            family=self.name,
            parts=parts,
            descriptor=descriptor,
            config=config,
            extra=extra,
            annotations=dict(manifest.annotations or {}),
            manifest=data,
            config_bytes=config_bytes,
            manifest_media_type=desc.mediaType,
        )
        return Reading(view, store)

    def rewrite(self, part: Part) -> Variant | None:
        """Docker model layers are raw files or plain tar: a compressed tar is decompressed first."""
        return Variant.TAR if part.variant in (Variant.TAR_GZIP, Variant.TAR_ZSTD) else None

    def write(self, view: ModelView, options: WriteOptions) -> Written:
        kept = can_keep(view, self.name)
        losses: list[Loss] = []
        layers = []
        nested = False
        for part in view.parts:
            media_type = _media_type(part, losses, kept)
            nested = nested or "/" in part.path or part.variant.is_tar
            layers.append(part.bare_blob(media_type, {
                UNTESTED: "false",
                METADATA: _docker_metadata(part),
                FILEPATH: part.path,
            }))
        config_type = CONFIG_V02 if nested else CONFIG_V01
        config_bytes = compact_json(_config(view))
        annotations = carried(view, self.name, config_bytes)
        manifest = Manifest(
            mediaType=OCI_MANIFEST,
            config=Descriptor.for_bytes(config_type, config_bytes),
            layers=layers,
            annotations={**strip(view.annotations), **annotations} or None,
        )
        for k in ("name", "version", "authors", "licenses", "title", "description", "docURL", "sourceURL",
                  "datasetsURL", "revision", "vendor"):
            if view.descriptor.get(k) not in (None, "", []):
                losses.append(Loss(f"descriptor.{k}", short(view.descriptor[k]), kept))
        for k in ("precision", "capabilities"):
            if view.config.get(k) not in (None, "", []):
                losses.append(Loss(f"config.{k}", short(view.config[k]), kept))
        losses += [Loss(k, short(v), kept) for k, v in sorted(view.extra.items()) if not k.startswith("docker.")]
        return Written(manifest.to_json_bytes(), OCI_MANIFEST, config_bytes, config_type, None, losses)


def _media_type(part: Part, losses: list[Loss], kept: bool) -> str:
    if part.variant in (Variant.TAR_GZIP, Variant.TAR_ZSTD):
        raise SourceError(
            f"{part.path}: a compressed tar layer ({part.variant.value}); Docker model layers are "
            "uncompressed (pull the model and push it again with --to docker-model)")
    if part.role in _ROLE_TYPES and (part.variant is Variant.RAW) == (part.role not in ("vllm-config", "dir-tar")):
        return _ROLE_TYPES[part.role]
    if part.variant is Variant.TAR:
        if part.kind is not Kind.WEIGHT_CONFIG:
            losses.append(Loss(f"layers[{part.path}].kind", part.kind.value, kept))
        return DIR_TAR
    name = part.path.lower()
    if part.kind is Kind.WEIGHT:
        if name.endswith(".gguf"):
            return MMPROJ if ("mmproj" in name or "projector" in posixpath.basename(name)) else GGUF
        if name.endswith(".safetensors"):
            return SAFETENSORS
        if name.endswith(".dduf"):
            return DDUF
        if name.endswith(".mmproj"):
            return MMPROJ
    if part.kind is Kind.DOC and _LICENSE_NAME.search(part.path):
        return LICENSE
    if part.kind is not Kind.WEIGHT_CONFIG:
        losses.append(Loss(f"layers[{part.path}].kind", part.kind.value, kept))
    return CHAT_TEMPLATE if name.endswith(".jinja") else MODEL_FILE


def _docker_metadata(part: Part) -> str:
    """Docker's file metadata (typeflag 0); a source's own metadata is kept when it has one."""
    if part.file_metadata:
        return part.file_metadata
    meta = {"name": posixpath.basename(part.path), "mode": part.mode, "uid": 0, "gid": 0,
            "size": part.blob.size, "mtime": EPOCH_ZERO, "typeflag": 0}
    return json.dumps(meta, separators=(",", ":"))


def _config(view: ModelView) -> dict[str, Any]:
    """Docker's ConfigFile: config (its field order), descriptor.created, rootfs diff_ids."""
    c, x = view.config, view.extra
    roles = {p.role for p in view.parts}
    fmt = c.get("format") or ("gguf" if "gguf" in roles or any(p.path.endswith(".gguf") for p in view.parts)
                              else "safetensors" if any(p.path.endswith(".safetensors") for p in view.parts)
                              else None)
    config: dict[str, Any] = {}
    for key, value in (("format", fmt), ("quantization", c.get("quantization")),
                       ("parameters", c.get("paramSize")), ("architecture", c.get("architecture")),
                       ("size", x.get("docker.size")), ("gguf", x.get("docker.gguf")),
                       ("safetensors", x.get("docker.safetensors")), ("diffusers", x.get("docker.diffusers")),
                       ("context_size", x.get("docker.context_size"))):
        if value not in (None, "", {}):
            config[key] = value
    descriptor: dict[str, Any] = {}
    if view.descriptor.get("createdAt"):
        descriptor["created"] = view.descriptor["createdAt"]
    return {"config": config, "descriptor": descriptor,
            "rootfs": {"type": "rootfs", "diff_ids": [p.diff_id for p in view.parts]}}
