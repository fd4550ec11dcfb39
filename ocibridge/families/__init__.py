"""OCI model families (ModelPack, KitOps ModelKits, Docker model artifacts, ...): detection
by what an artifact is, and conversion between them with the blobs reused byte for byte."""

from __future__ import annotations

from .base import ModelFamily, Reading, WriteOptions
from .convert import Conversion, ConvertResult, convert, convert_artifact
from .model import Loss, ModelView, Part, Written
from .registry import Identified, NotAModel, by_name, identify, names, register

__all__ = [
    "Conversion", "ConvertResult", "Identified", "Loss", "ModelFamily", "ModelView", "NotAModel", "Part",
    "Reading", "WriteOptions", "Written", "by_name", "convert", "convert_artifact", "identify", "names",
    "register",
]
