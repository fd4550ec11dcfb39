"""The metadata flags every writer accepts (``--arch`` & co.) and the field each sets.

Kept free of imports so that the command line adds the flags without loading a kind."""

from __future__ import annotations

#: flag name → (section, ModelPack field)
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
