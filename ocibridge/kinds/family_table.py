"""The registration lines of the model families, and the metadata flags every writer accepts.

Kept free of imports so that the command line can list ``--to`` choices without loading a
family (``--help`` loads neither pydantic nor httpx). :mod:`.registry` imports each module on
first use. Adding a family: a module implementing :class:`.base.ModelFamily` (plus ``write`` or
``export``) and one line here.
"""

from __future__ import annotations

#: (``--to`` name, module, class), in detection order: ModelPack first, so an index holding
#: several models resolves to its ModelPack entry.
REGISTRATIONS: tuple[tuple[str, str, str], ...] = (
    ("modelpack", "ocibridge.kinds.modelpack.family", "ModelPackFamily"),
    ("modelkit", "ocibridge.kinds.kitops.family", "ModelKitFamily"),
    ("docker-model", "ocibridge.kinds.docker.family", "DockerModelFamily"),
    ("modelcar", "ocibridge.kinds.modelcar.family", "ModelCarFamily"),
    ("ollama", "ocibridge.kinds.ollama.family", "OllamaFamily"),
)

#: ``--arch`` & co.: flag name → (section, ModelPack field)
OVERRIDES: dict[str, tuple[str, str]] = {
    "arch": ("config", "architecture"),
    "family": ("descriptor", "family"),
    "format": ("config", "format"),
    "param_size": ("config", "paramSize"),
    "precision": ("config", "precision"),
    "quantization": ("config", "quantization"),
    "version": ("descriptor", "version"),
    "license": ("descriptor", "licenses"),
    "description": ("descriptor", "description"),
    "name": ("descriptor", "name"),
}


def names() -> list[str]:
    return [name for name, _, _ in REGISTRATIONS]
