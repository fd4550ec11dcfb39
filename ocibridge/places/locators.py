"""The typed locators :func:`ocibridge.places.locate.locate` makes, and what any code may ask of
one, without importing the locator itself.

A kind's own place (``ollama:NAME``, ``hf:ORG/NAME``) is a :class:`KindPlace`: code outside the
kind asks it the questions below and never tests its type, so a new kind's place needs no
``isinstance`` added anywhere (tests/kinds/test_kind_places.py holds this)."""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

from ocibridge.oci.reference import LayoutReference, PathReference, RegistryReference


@runtime_checkable
class KindPlace(Protocol):
    """A place a kind of model names in its own spelling: ``text`` (as the user wrote it),
    ``kind`` (the kind's name in the table of kinds, whose opener opens it), ``remote`` (on an
    endpoint of the network, ``ollama://`` or ``hf://``, not on this machine), ``is_store`` (a
    store copies write into and read from, the Ollama store, not only a source),
    ``holds_referrers`` (signatures and evidence can be attached and checked there), and
    ``repository_text`` (the place without its tag, digest or revision)."""

    kind: ClassVar[str]
    is_store: ClassVar[bool]

    @property
    def text(self) -> str: ...

    @property
    def remote(self) -> bool: ...

    @property
    def holds_referrers(self) -> bool: ...

    @property
    def repository_text(self) -> str: ...

    def registry_reference(self) -> RegistryReference | None:
        """The registry repository the place is served from, if it is on a registry."""


#: every place a text can name: the stores' references, a file or directory, a kind's own place
Locator = RegistryReference | LayoutReference | PathReference | KindPlace


def text_of(locator: Locator) -> str:
    """How the user wrote a locator (its full form when it was built, not typed)."""
    return locator.text


def on_registry(locator: Locator) -> bool:
    """Whether a locator names something on a registry, where blobs can be mounted from one
    repository into another."""
    return registry_of(locator) is not None


def registry_of(locator: Locator) -> RegistryReference | None:
    """The registry repository a locator names, directly or as a kind's place served from one."""
    if isinstance(locator, RegistryReference):
        return locator
    if isinstance(locator, KindPlace) and locator.is_store:
        return locator.registry_reference()
    return None


def on_this_machine(locator: Locator) -> bool:
    """Whether a store locator names a place on this machine (a layout, the local Ollama store)."""
    return isinstance(locator, LayoutReference) or (isinstance(locator, KindPlace) and locator.is_store
                                                    and not locator.remote)


def is_store(locator: Locator) -> bool:
    """Whether a locator names a store (a registry, a layout, a kind's store), not a source only."""
    return isinstance(locator, (LayoutReference, RegistryReference)) or (isinstance(locator, KindPlace)
                                                                        and locator.is_store)
