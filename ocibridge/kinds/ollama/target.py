"""The Ollama kind's opener (its line of the table of kinds names it): the store an
``ollama:NAME`` or ``ollama://[host/]NAME`` locator names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocibridge.oci.reference import OllamaReference, parse_ollama_reference
from ocibridge.stores.target import StoreTarget

if TYPE_CHECKING:
    from ocibridge.stores.base import WritableStore
    from ocibridge.stores.registry.options import RegistryOptions


def open_ollama_target(ref: str | OllamaReference, *, for_write: bool = False,
                       options: RegistryOptions | None = None) -> StoreTarget:
    """``ollama:NAME`` → the local store ($OLLAMA_MODELS); ``ollama://[host/]NAME`` → a
    registry repository ``namespace/model`` (plain HTTP for loopback hosts). Opened for
    writing, both take Ollama models only (see kinds/ollama/destcheck.py)."""
    if isinstance(ref, str):  # the API's edge: the kind's grammar, once
        ref = parse_ollama_reference(ref)
    name, text = ref.name, ref.text
    store: WritableStore
    if ref.remote:
        from ocibridge.kinds.ollama.destcheck import OllamaRegistryStore
        from ocibridge.stores.registry import open_repository

        on_registry = ref.registry_reference()
        assert on_registry is not None  # remote: on a registry
        repository = open_repository(on_registry, options)
        store = OllamaRegistryStore(repository, text) if for_write else repository
    else:
        from ocibridge.kinds.ollama.store import OllamaStore, default_models_dir

        store = OllamaStore(default_models_dir(), name, create=for_write, label=text)
    return StoreTarget(store, ref.reference, name.tag, text)


def ollama_reference_of(located: object) -> OllamaReference | None:
    """``located`` when it is this kind's place (the Ollama kind answers; no code outside it tests the type)."""
    return located if isinstance(located, OllamaReference) else None
