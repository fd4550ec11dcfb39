"""Ollama models: the local store (``ollama:NAME``) and Ollama registries (``ollama://…``).

``read_ollama`` turns an Ollama model into a model package, ``export_ollama`` writes an
artifact back as an Ollama model. The store itself is :mod:`ocibridge.kinds.ollama.stores`; the
names here that belong there are re-exported for callers of this package.
"""

from __future__ import annotations

from ocibridge.kinds.ollama.blobmounts import mount_sources
from ocibridge.kinds.ollama.destcheck import NotAnOllamaModel, OllamaRegistryStore
from ocibridge.kinds.ollama.exporter import export_ollama
from ocibridge.kinds.ollama.manifest import OllamaConfig, OllamaManifest, parse_ollama_manifest
from ocibridge.kinds.ollama.mapping import ANNOTATION_MANIFEST_DIGEST, ANNOTATION_NAME, CONFIG_FILE, MANIFEST_FILE
from ocibridge.kinds.ollama.reader import read_ollama
from ocibridge.kinds.ollama.store import OllamaStore, default_models_dir
from ocibridge.kinds.ollama.target import open_ollama_target
from ocibridge.model.gguf_header import GGUFHeader, read_gguf_header
from ocibridge.oci.reference import OllamaName, parse_ollama_name

__all__ = [
    "ANNOTATION_MANIFEST_DIGEST", "ANNOTATION_NAME", "CONFIG_FILE", "MANIFEST_FILE",
    "GGUFHeader", "NotAnOllamaModel", "OllamaConfig", "OllamaManifest", "OllamaName",
    "OllamaRegistryStore", "OllamaStore", "export_ollama", "open_ollama_target",
    "default_models_dir", "mount_sources", "parse_ollama_manifest", "parse_ollama_name",
    "read_gguf_header", "read_ollama",
]
