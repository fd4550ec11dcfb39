"""ocibridge: ML models (Carton, MLSteam, Ollama, directories) as ModelPack OCI artifacts."""

from .api import TransferOptions, copy_reference, inspect, load_source, pull, push, tags, validate
from .errors import OcibridgeError
from .modelpack.builder import BuildOptions, build
from .oci.mediatypes import Family, Kind, Variant

__version__ = "0.1.0"

__all__ = [
    "BuildOptions",
    "Family",
    "Kind",
    "OcibridgeError",
    "TransferOptions",
    "Variant",
    "build",
    "copy_reference",
    "inspect",
    "load_source",
    "pull",
    "push",
    "tags",
    "validate",
]
