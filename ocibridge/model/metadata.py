"""Metadata read from the model itself: a Hugging Face ``config.json``, safetensors headers
(only the header: 8 bytes of length, then JSON) and a GGUF header.

Fills what the package does not already say; flags (``--arch`` ...) are applied after, so they
win. A file that does not parse is skipped: metadata is a help, never a reason to fail a push.
The files may come from anyone (a ModelCar image another tool built), so every reader here is
bounded in bytes read, work done (dimensions counted, nesting) and value range; beyond a bound
the field stays unknown and a note says why.
"""

from __future__ import annotations

import logging
import posixpath
import struct
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.core.terminal import one_line
from ocibridge.model.package import ModelFile, ModelPackage

MAX_CONFIG_JSON = 1 << 20
MAX_SAFETENSORS_HEADER = 100 << 20  # the format's own limit
#: What is read of one safetensors header for metadata (real ones are a few hundred KiB).
MAX_METADATA_HEADER = 16 << 20
#: Dimensions counted over all headers of a model: the work a hostile header can ask for.
MAX_DIMS = 1_000_000
#: A dimension, a tensor's element count and the model's total must each stay below this
#: (2^63, as the formats' own int64 counts): beyond it the count is unknown, never an overflow.
MAX_COUNT = 1 << 63

NOTES = logging.getLogger("ocibridge.metadata")
#: torch dtype names and safetensors dtype codes → ModelPack precision
PRECISIONS = {
    "float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float": "fp32",
    "half": "fp16", "double": "fp64", "int8": "int8", "uint8": "uint8", "int4": "int4",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
    "F64": "fp64", "F32": "fp32", "F16": "fp16", "BF16": "bf16", "I8": "int8", "U8": "uint8",
    "F8_E4M3": "fp8", "F8_E5M2": "fp8", "I16": "int16", "I32": "int32", "I64": "int64",
}
_FLOAT_CODES = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"}


def note(message: str) -> None:
    """Say on stderr why a metadata field stays unknown (a warning, never an error)."""
    NOTES.warning("ocibridge: note: %s", one_line(message))


def _loads(data: bytes, where: str) -> Any:
    """JSON, or None (with a note) when it is not JSON or nests too deep to read."""
    try:
        return boundedjson.loads(data)
    except boundedjson.JsonTooDeep:
        note(f"{where}: nested too deeply; its metadata is unknown")
    except ValueError:
        pass
    return None


def _read_json(f: ModelFile) -> Any:
    if f.size > MAX_CONFIG_JSON or f.opener is None:
        return None
    try:
        with f.open() as reader:
            data = reader.read(MAX_CONFIG_JSON + 1)
    except OSError:
        return None
    return None if len(data) > MAX_CONFIG_JSON else _loads(data, f.path)


def safetensors_header(f: ModelFile) -> dict[str, Any] | None:
    """The JSON header of a safetensors file, read without its tensor data."""
    if f.opener is None or f.size < 8:
        return None
    try:
        with f.open() as reader:
            (length,) = struct.unpack("<Q", reader.read(8))
            if length > min(MAX_SAFETENSORS_HEADER, f.size - 8):
                return None
            if length > MAX_METADATA_HEADER:
                note(f"{f.path}: safetensors header of {length} bytes is more than {MAX_METADATA_HEADER} "
                     "read for metadata; parameter count unknown")
                return None
            data = reader.read(length)
    except (OSError, struct.error):
        return None
    doc = _loads(data, f"{f.path}: safetensors header")
    return doc if isinstance(doc, dict) else None


class Unknown(Exception):
    """A count beyond its bounds: the field it feeds stays unknown."""


def _elements(shape: list[Any], budget: list[int]) -> int | None:
    """A tensor's element count; None for a shape that is not a list of counts. Each dimension
    spends one of ``budget``; a value out of range raises :class:`Unknown`."""
    budget[0] -= len(shape)
    if budget[0] < 0:
        raise Unknown(f"more than {MAX_DIMS} tensor dimensions")
    n = 1
    for dim in shape:
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 0:
            return None
        if dim >= MAX_COUNT:
            raise Unknown("a tensor dimension beyond 2^63")
        n *= dim  # n < 2^63 and dim < 2^63: never a huge integer
        if n >= MAX_COUNT:
            raise Unknown("a tensor of more than 2^63 elements")
    return n


def count_parameters(headers: list[dict[str, Any]]) -> dict[str, int]:
    """dtype → number of elements over every tensor of the headers; empty, with a note, when a
    header asks for more work than MAX_DIMS or holds counts beyond 2^63."""
    counts: dict[str, int] = {}
    budget = [MAX_DIMS]
    try:
        for header in headers:
            for name, tensor in header.items():
                if name == "__metadata__" or not isinstance(tensor, dict):
                    continue
                shape, dtype = tensor.get("shape"), tensor.get("dtype")
                if not isinstance(shape, list) or not isinstance(dtype, str):
                    continue
                n = _elements(shape, budget)
                if n is not None:
                    counts[dtype] = counts.get(dtype, 0) + n
                    if counts[dtype] >= MAX_COUNT:
                        raise Unknown("more than 2^63 parameters")
    except Unknown as e:
        note(f"safetensors headers: {e}; parameter count unknown")
        return {}
    return counts


#: A name read from a model's files (an architecture, a family) longer than this is no name.
MAX_NAME = 256


def _plausible(value: Any, what: str) -> bool:
    """A non-empty string of at most MAX_NAME characters; a longer one is noted and dropped."""
    if not isinstance(value, str) or not value:
        return False
    if len(value) > MAX_NAME:
        note(f"config.json: {what} of {len(value)} characters is no name; left unknown")
        return False
    return True


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
    if isinstance(architectures, list) and architectures and _plausible(architectures[0], "architectures"):
        config["architecture"] = architectures[0]
    if _plausible(hf.get("model_type"), "model_type"):
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
    except OcibridgeError as e:
        note(f"{e}; GGUF metadata unknown")
        return {}
    except (OSError, ValueError, RecursionError):
        return {}
    out: dict[str, Any] = {}
    for key, value in (("architecture", header.architecture), ("paramSize", header.param_size),
                       ("quantization", header.quantization)):
        if value:
            out[key] = value
    return out


def fill(package: ModelPackage) -> None:
    """Set the descriptor and config fields (and the manifest annotations) the files say and the
    package does not: config.json and the weights' headers, then the model card's front matter."""
    from ocibridge.model.cardmeta import card_fields, read_front_matter

    descriptor, config = infer(package)
    card_descriptor, card_config, annotations = card_fields(read_front_matter(package.files))
    for key, value in {**card_descriptor, **descriptor}.items():
        package.descriptor.setdefault(key, value)
    for key, value in {**card_config, **config}.items():
        package.config.setdefault(key, value)
    for key, text in annotations.items():
        package.annotations.setdefault(key, text)
