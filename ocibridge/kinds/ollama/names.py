"""The file names an Ollama manifest gives its named layers (safetensors tensors, JSON files),
checked once for the reader and the writers alike.

A writer that stored a manifest the reader then refuses (a layer named ``../../x``) would leave a
model nobody can pull: the Ollama store and an ``ollama://`` destination call this before writing.
"""

from __future__ import annotations

from ocibridge.core.fsutil import safe_relpath
from ocibridge.errors import SourceError, UnsafePath
from ocibridge.kinds.ollama.manifest import OllamaManifest, parse_layer_type
from ocibridge.kinds.ollama.mapping import CONFIG_FILE, MANIFEST_FILE, NAMED_KINDS


def layer_names(manifest: OllamaManifest) -> list[str | None]:
    """Per layer, its safe relative file name (named kinds) or None (fixed names of its kind).
    Raises UnsafePath or SourceError on a missing, unsafe or repeated name."""
    used = {MANIFEST_FILE, CONFIG_FILE}
    names: list[str | None] = []
    for layer in manifest.layers:
        lt = parse_layer_type(layer.mediaType)
        if lt is None or lt.kind not in NAMED_KINDS:
            names.append(None)
            continue
        name = layer.name or lt.params.get("name")
        if not name:
            raise SourceError(f"{lt.kind} layer {layer.digest} has no name")
        try:
            path = safe_relpath(name, f"{lt.kind} layer name")
        except UnsafePath as e:
            raise UnsafePath(f"Ollama manifest: {e}") from None
        if path in used:
            raise SourceError(f"Ollama manifest: two layers named {path!r}")
        used.add(path)
        names.append(path)
    return names
