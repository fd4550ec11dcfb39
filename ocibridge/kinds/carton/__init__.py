"""Carton (``.carton``) ⇄ ModelPack: read a carton into a model package, export it back.

Mapping table and annotation keys: docs/formats/carton.md.
"""

from __future__ import annotations

from ocibridge.kinds.carton.errors import CartonError, CartonLinkError, CartonMismatch, NotACarton
from ocibridge.kinds.carton.exporter import export_carton
from ocibridge.kinds.carton.links import LinkFetcher
from ocibridge.kinds.carton.manifest import CartonLinks, CartonManifest, format_manifest, parse_links, parse_manifest
from ocibridge.kinds.carton.mapping import ANNOTATION_MODEL_HASH, ANNOTATION_PREFIX
from ocibridge.kinds.carton.reader import SOURCE_FORMAT, read_carton
from ocibridge.kinds.carton.zipread import DEFAULT_LIMITS, CartonLimits

__all__ = [
    "ANNOTATION_MODEL_HASH",
    "ANNOTATION_PREFIX",
    "CartonError",
    "CartonLimits",
    "CartonLinkError",
    "CartonLinks",
    "CartonManifest",
    "CartonMismatch",
    "DEFAULT_LIMITS",
    "LinkFetcher",
    "NotACarton",
    "SOURCE_FORMAT",
    "export_carton",
    "format_manifest",
    "parse_links",
    "parse_manifest",
    "read_carton",
]
