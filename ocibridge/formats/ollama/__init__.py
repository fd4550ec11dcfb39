"""Ollama models: the local store (``ollama:NAME``) and Ollama registries (``ollama://…``).

``read_ollama`` turns an Ollama model into a model package, ``export_ollama`` writes an
artifact back as an Ollama model; ``open_ollama_target`` maps the user's string to a store.
"""

from __future__ import annotations

import contextlib

from ...oci.reference import RegistryReference
from ...stores.base import Store
from ...targets import StoreTarget
from .exporter import export_ollama
from .gguf_header import GGUFHeader, read_gguf_header
from .guard import NotAnOllamaModel, OllamaRegistryStore
from .manifest import OllamaConfig, OllamaManifest, parse_ollama_manifest
from .mapping import ANNOTATION_MANIFEST_DIGEST, ANNOTATION_NAME, CONFIG_FILE, MANIFEST_FILE
from .mount import premount
from .names import OllamaName, default_models_dir, parse_ollama_name
from .reader import read_ollama
from .store import OllamaStore

REGISTRY_SCHEME = "ollama://"
LOCAL_SCHEME = "ollama:"

__all__ = [
    "ANNOTATION_MANIFEST_DIGEST", "ANNOTATION_NAME", "CONFIG_FILE", "MANIFEST_FILE",
    "GGUFHeader", "NotAnOllamaModel", "OllamaConfig", "OllamaManifest", "OllamaName",
    "OllamaRegistryStore", "OllamaStore", "export_ollama", "open_ollama_target",
    "parse_ollama_manifest", "parse_ollama_name", "premount", "read_gguf_header", "read_ollama",
]


def open_ollama_target(text: str, *, for_write: bool = False, **registry_options) -> StoreTarget:
    """``ollama:NAME`` → the local store ($OLLAMA_MODELS); ``ollama://[host/]NAME`` → a
    registry repository ``namespace/model`` (plain HTTP for loopback hosts). Opened for
    writing, both take Ollama models only (see guard.py)."""
    if text.startswith(REGISTRY_SCHEME):
        name = parse_ollama_name(text[len(REGISTRY_SCHEME):])
        from ...stores.registry import open_repository

        ref = RegistryReference(name.host, name.repository, name.tag, name.digest)
        store: Store = open_repository(ref, **registry_options)
        if for_write:
            store = OllamaRegistryStore(store, text)
    elif text.startswith(LOCAL_SCHEME):
        name = parse_ollama_name(text[len(LOCAL_SCHEME):])
        store = OllamaStore(default_models_dir(), name, create=for_write, label=text)
    else:
        raise ValueError(f"not an Ollama reference: {text!r}")
    with contextlib.suppress(AttributeError, TypeError):
        store.ollama_name = name  # type: ignore[attr-defined]  # read back by read_ollama; no typed slot until issue 15's store protocols
    reference = name.digest or name.tag
    return StoreTarget(store, reference, name.tag, text)
