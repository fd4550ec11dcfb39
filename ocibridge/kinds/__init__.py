"""OCI model families (ModelPack, KitOps ModelKits, Docker model artifacts, ModelCar images,
Ollama models): detection by what an artifact is, and conversion between them with the blobs
reused byte for byte. Names load on first use (the command line imports this package for its
``--to`` choices only)."""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "ModelFamily": "family", "Reading": "family", "WriteOptions": "family", "Exported": "family",
    "Conversion": "conversion", "ConvertResult": "conversion", "convert": "conversion",
    "convert_artifact": "conversion", "convert_staged": "conversion",
    "Loss": "neutral", "ModelView": "neutral", "Part": "neutral", "Written": "neutral",
    "Identified": "families", "NotAModel": "families", "by_name": "families", "identify": "families",
    "names": "families", "register": "table", "unregister": "table", "KINDS": "table",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
