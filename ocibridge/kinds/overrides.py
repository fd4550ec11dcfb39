"""The metadata flags every writer accepts (``--arch`` & co.), the ModelPack field each sets, and
where a ModelPack metadata field lives (the config section or the descriptor): one rule, which the
flags and the early CNAI draft's annotations (kinds/modelpack/draft.py) both set fields by.

Kept free of the kinds' imports so that the command line adds the flags without loading a kind."""

from __future__ import annotations

from typing import Any

#: the metadata fields the ModelPack config section holds; every other one is the descriptor's
CONFIG_FIELDS = frozenset({"architecture", "format", "paramSize", "precision", "quantization"})
#: the fields held as a list (a flag or an annotation gives one string)
LIST_FIELDS = frozenset({"authors", "licenses"})

#: flag name → ModelPack field
FLAG_FIELDS: dict[str, str] = {
    "arch": "architecture",
    "family": "family",
    "format": "format",
    "param_size": "paramSize",
    "precision": "precision",
    "quantization": "quantization",
    "version": "version",
    "license": "licenses",
    "description": "description",
    "name": "name",
}


def section_of(field: str) -> str:
    """``config`` or ``descriptor``: where the ModelPack field ``field`` lives."""
    return "config" if field in CONFIG_FIELDS else "descriptor"


def field_value(field: str, text: str) -> Any:
    """``text`` as the field holds it (a list of one for a list field)."""
    return [text] if field in LIST_FIELDS else text


#: flag name → (section, ModelPack field)
OVERRIDES: dict[str, tuple[str, str]] = {flag: (section_of(field), field) for flag, field in FLAG_FIELDS.items()}


def set_flagged_fields(descriptor: dict[str, Any], config: dict[str, Any], overrides: dict[str, str]) -> None:
    """Set the field each flag of ``overrides`` (flag name → value) names, in its section."""
    for flag, value in overrides.items():
        field = FLAG_FIELDS[flag]
        (config if field in CONFIG_FIELDS else descriptor)[field] = field_value(field, value)
