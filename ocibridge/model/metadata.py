"""Metadata read from the model itself: a Hugging Face ``config.json``, safetensors headers
(only the header: 8 bytes of length, then JSON) and a GGUF header.

Fills what the package does not already say; flags (``--arch`` ...) are applied after, so they
win. A file that does not parse is skipped: metadata is a help, never a reason to fail a push.
"""

from __future__ import annotations

import json
import posixpath
import struct
from typing import Any

from ocibridge.model.package import ModelFile, ModelPackage

MAX_CONFIG_JSON = 1 << 20
MAX_SAFETENSORS_HEADER = 100 << 20  # the format's own limit
#: torch dtype names and safetensors dtype codes → ModelPack precision
PRECISIONS = {
    "float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float": "fp32",
    "half": "fp16", "double": "fp64", "int8": "int8", "uint8": "uint8", "int4": "int4",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
    "F64": "fp64", "F32": "fp32", "F16": "fp16", "BF16": "bf16", "I8": "int8", "U8": "uint8",
    "F8_E4M3": "fp8", "F8_E5M2": "fp8", "I16": "int16", "I32": "int32", "I64": "int64",
}
_FLOAT_CODES = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"}


def _read_json(f: ModelFile) -> Any:
    if f.size > MAX_CONFIG_JSON or f.opener is None:
        return None
    try:
        with f.open() as reader:
            return json.loads(reader.read(MAX_CONFIG_JSON + 1))
    except (OSError, ValueError):
        return None


def safetensors_header(f: ModelFile) -> dict[str, Any] | None:
    """The JSON header of a safetensors file, read without its tensor data."""
    if f.opener is None or f.size < 8:
        return None
    try:
        with f.open() as reader:
            (length,) = struct.unpack("<Q", reader.read(8))
            if length > min(MAX_SAFETENSORS_HEADER, f.size - 8):
                return None
            doc = json.loads(reader.read(length))
    except (OSError, ValueError, struct.error):
        return None
    return doc if isinstance(doc, dict) else None


def count_parameters(headers: list[dict[str, Any]]) -> dict[str, int]:
    """dtype → number of elements over every tensor of the headers."""
    counts: dict[str, int] = {}
    for header in headers:
        for name, tensor in header.items():
            if name == "__metadata__" or not isinstance(tensor, dict):
                continue
            shape, dtype = tensor.get("shape"), tensor.get("dtype")
            if not isinstance(shape, list) or not isinstance(dtype, str):
                continue
            n = 1
            for dim in shape:
                if not isinstance(dim, int) or dim < 0:
                    break
                n *= dim
            else:
                counts[dtype] = counts.get(dtype, 0) + n
    return counts


def _hf_config(files: list[ModelFile]) -> dict[str, Any]:
    """The shallowest ``config.json`` (a model's own, not a sub-module's)."""
    candidates = sorted((f for f in files if posixpath.basename(f.path) == "config.json"),
                        key=lambda f: (f.path.count("/"), f.path))
    for f in candidates:
        doc = _read_json(f)
        if isinstance(doc, dict):
            return doc
    return {}


def infer(package: ModelPackage) -> tuple[dict[str, Any], dict[str, Any]]:
    """(descriptor fields, config fields) the model's files say."""
    from ocibridge.model.gguf_header import format_param_count

    descriptor: dict[str, Any] = {}
    config: dict[str, Any] = {}
    files = [f for f in package.files if f.link_target is None]
    hf = _hf_config(files)
    architectures = hf.get("architectures")
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        config["architecture"] = architectures[0]
    if isinstance(hf.get("model_type"), str) and hf["model_type"]:
        descriptor["family"] = hf["model_type"]
    dtype = hf.get("torch_dtype") or hf.get("dtype")
    if isinstance(dtype, str) and dtype in PRECISIONS:
        config["precision"] = PRECISIONS[dtype]
    shards = [f for f in files if f.path.lower().endswith(".safetensors")]
    ggufs = [f for f in files if f.path.lower().endswith(".gguf")
             and "mmproj" not in f.path.lower() and "projector" not in f.path.lower()]
    if shards:
        config["format"] = "safetensors"
        headers = [h for h in (safetensors_header(f) for f in shards) if h is not None]
        counts = count_parameters(headers)
        if counts:
            config["paramSize"] = format_param_count(sum(counts.values()))
            floats = {k: v for k, v in counts.items() if k in _FLOAT_CODES} or counts
            dominant = max(floats.items(), key=lambda kv: kv[1])[0]
            if "precision" not in config and dominant in PRECISIONS:
                config["precision"] = PRECISIONS[dominant]
    elif len(ggufs) == 1:
        config["format"] = "gguf"
        config.update(_gguf(ggufs[0]))
    return descriptor, config


def _gguf(f: ModelFile) -> dict[str, Any]:
    from ocibridge.errors import OcibridgeError
    from ocibridge.model.gguf_header import read_gguf_header

    try:
        with f.open() as reader:
            header = read_gguf_header(reader, where=f.path)
    except (OcibridgeError, OSError, ValueError):
        return {}
    out: dict[str, Any] = {}
    for key, value in (("architecture", header.architecture), ("paramSize", header.param_size),
                       ("quantization", header.quantization)):
        if value:
            out[key] = value
    return out


def fill(package: ModelPackage) -> None:
    """Set the descriptor and config fields the files say and the package does not."""
    descriptor, config = infer(package)
    for key, value in descriptor.items():
        package.descriptor.setdefault(key, value)
    for key, value in config.items():
        package.config.setdefault(key, value)
