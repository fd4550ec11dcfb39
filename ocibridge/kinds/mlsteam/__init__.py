"""MLSteam ``.mlarchive`` ⇄ ModelPack: read an archive into a model package, export it back.

Mapping table: docs/formats/mlsteam.md.
"""

from __future__ import annotations

from ocibridge.kinds.mlsteam.exporter import NotAnMlarchive, export_mlarchive
from ocibridge.kinds.mlsteam.manifest import InvalidManifest, MlarchiveManifest, parse_manifest
from ocibridge.kinds.mlsteam.mapping import (
    ANNOTATION_IN_MEMORY,
    ANNOTATION_INTEGRITY,
    ANNOTATION_MODELS,
    ANNOTATION_PREFIX,
    ANNOTATION_SCHEMA,
    ANNOTATION_SERVICES,
)
from ocibridge.kinds.mlsteam.reader import SOURCE_FORMAT, read_mlarchive
from ocibridge.kinds.mlsteam.ziparchive import DEFAULT_LIMITS, ZipLimits

__all__ = [
    "ANNOTATION_IN_MEMORY",
    "ANNOTATION_INTEGRITY",
    "ANNOTATION_MODELS",
    "ANNOTATION_PREFIX",
    "ANNOTATION_SCHEMA",
    "ANNOTATION_SERVICES",
    "DEFAULT_LIMITS",
    "InvalidManifest",
    "MlarchiveManifest",
    "NotAnMlarchive",
    "SOURCE_FORMAT",
    "ZipLimits",
    "export_mlarchive",
    "parse_manifest",
    "read_mlarchive",
]
