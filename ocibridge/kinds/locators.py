"""The typed locators :func:`ocibridge.kinds.locate.locate` makes, and what any code may ask of
one, without importing the locator itself (which reads the table of kinds, and through it every
kind's modules: kinds import this module instead)."""

from __future__ import annotations

from ocibridge.kinds.hf.locator import HubReference
from ocibridge.oci.reference import (
    LayoutReference,
    OllamaReference,
    PathReference,
    RegistryReference,
)

#: every place a text can name: the stores' references, a file or directory, a kind's own place
Locator = RegistryReference | LayoutReference | OllamaReference | PathReference | HubReference


def text_of(locator: Locator) -> str:
    """How the user wrote a locator (its full form when it was built, not typed)."""
    return locator.text


def on_registry(locator: Locator) -> bool:
    """Whether a locator names something on a registry, where blobs can be mounted from one
    repository into another."""
    return isinstance(locator, RegistryReference) or (isinstance(locator, OllamaReference) and locator.remote)


def on_this_machine(locator: Locator) -> bool:
    """Whether a store locator names a place on this machine (a layout, the local Ollama store)."""
    return isinstance(locator, LayoutReference) or (isinstance(locator, OllamaReference) and not locator.remote)
