"""Where each Ollama layer goes in a model package: its path and its ModelPack kind.

Shared by the reader (Ollama → package) and the exporter (package → Ollama) so the two
directions cannot drift apart.
"""

from __future__ import annotations

from ocibridge.oci.mediatypes import Kind

ANNOTATION_PREFIX = "io.ollama."
ANNOTATION_NAME = "io.ollama.name"  # the Ollama name the model was read from
ANNOTATION_MANIFEST_DIGEST = "io.ollama.manifest.digest"  # digest of the Ollama manifest

#: Files that carry the Ollama manifest and config verbatim, so an export restores them exactly.
MANIFEST_FILE = "ollama-manifest.json"
CONFIG_FILE = "ollama-config.json"

#: kind → (path of the first such layer, ModelPack kind), for the kinds :func:`default_path`'s rule
#: (the kind is the path, a config) does not fit; template, system, prompt, tokenizer and
#: tokenizer.config follow the rule, as any kind Ollama adds later does
LAYER_PATHS: dict[str, tuple[str, Kind]] = {
    "model": ("model.gguf", Kind.WEIGHT),
    "adapter": ("adapter.gguf", Kind.WEIGHT),
    "projector": ("projector.gguf", Kind.WEIGHT),
    "params": ("params.json", Kind.WEIGHT_CONFIG),
    "messages": ("messages.json", Kind.WEIGHT_CONFIG),
    "license": ("license", Kind.DOC),
    "config": ("ollama-layer-config.json", Kind.WEIGHT_CONFIG),
}
#: Kinds whose layers carry their own file name (``name`` field or media-type parameter).
NAMED_KINDS = {"tensor": Kind.WEIGHT, "json": Kind.WEIGHT_CONFIG}
#: Added to a tensor layer's name to make its path: the blob is a whole safetensors file
SAFETENSORS_SUFFIX = ".safetensors"


def named_path(kind: str, name: str, params: dict[str, str]) -> str:
    """The package path of a named layer. Ollama's tensor layers (x/create: one tensor, or one
    quantized tensor with its ``.scale``/``.bias`` companions, per blob) are each a whole
    safetensors file named after the tensor, so the path is the name plus ``.safetensors``:
    load_tensors, the mount and Hub clients then read it as the safetensors file it is. The
    seed form, whose media type carries ``dtype``/``shape``, holds the raw bytes: its name."""
    raw = "dtype" in params or "shape" in params
    if kind == "tensor" and not raw and not name.endswith(SAFETENSORS_SUFFIX):
        return name + SAFETENSORS_SUFFIX
    return name


def numbered(path: str, n: int) -> str:
    """``adapter.gguf``, 2 → ``adapter-2.gguf``; ``license``, 3 → ``license-3``."""
    if n <= 1:
        return path
    stem, dot, ext = path.partition(".")
    return f"{stem}-{n}{dot}{ext}"


def default_path(kind: str) -> tuple[str, Kind]:
    """Path and kind of an Ollama layer kind without a name: the table's, else the kind itself as a config."""
    return LAYER_PATHS.get(kind, (kind, Kind.WEIGHT_CONFIG))
