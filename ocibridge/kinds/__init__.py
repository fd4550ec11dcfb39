"""OCI model families (ModelPack, KitOps ModelKits, Docker model artifacts, ModelCar images,
Ollama models): detection by what an artifact is, and conversion between them with the blobs
reused byte for byte. Names load on first use (the command line imports this package for its
``--to`` choices only)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

from ocibridge.kinds import table as _table
from ocibridge.places import kinds as _places

_HOMES = {
    "ModelFamily": "family", "Reading": "family", "WriteOptions": "family", "Exported": "family",
    "Conversion": "conversion", "ConvertResult": "conversion", "convert": "conversion",
    "convert_artifact": "conversion", "convert_staged": "conversion",
    "Loss": "neutral", "ModelView": "neutral", "Part": "neutral", "Written": "neutral",
    "Identified": "families", "NotAModel": "families", "by_name": "families", "identify": "families",
    "names": "families", "register": "table", "unregister": "table", "KINDS": "table",
}
__all__ = sorted(_HOMES)


def _place_kinds() -> Iterator[_places.PlaceKind]:
    """What places need of the table of kinds, read as it is now (a kind registered later too)."""
    for line in _table.KINDS:
        if line.schemes or line.suffixes:
            yield _places.PlaceKind(line.name, line.schemes, line.suffixes, line.grammar, line.opener)


_places.provide(_place_kinds)  # the kinds tell places about their places: places import no kind


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
