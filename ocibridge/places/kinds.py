"""The kinds' side of places, provided from above: what a kind with a place of its own tells
the locator (its schemes and the grammar that reads them, its file suffixes) and the opener
(the function that opens its place), without this package importing a kind.

The kinds package calls :func:`provide` when it is imported, handing over a function that reads
its table of kinds as it is then (a kind registered at run time included). The package's façade
(``ocibridge/__init__.py``, the top layer, run before any module of the package) imports the
kinds, so whoever imports any part of ocibridge has them provided. An unprovided registry would
be an error, never a guess: a text with a kind's scheme would otherwise be read as a registry name."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PlaceKind:
    """A kind as places see it: names of its functions, each (module, function), loaded on use."""

    name: str
    schemes: tuple[str, ...] = ()  # a text starting so is this kind's place
    suffixes: tuple[str, ...] = ()  # a name ending so is a file (an archive), not a registry name
    grammar: tuple[str, str] | None = None  # text -> the kind's locator
    opener: tuple[str, str] | None = None  # (locator, *, for_write, options) -> a target


_provider: Callable[[], Iterable[PlaceKind]] | None = None


def provide(provider: Callable[[], Iterable[PlaceKind]]) -> None:
    """Called by the kinds package: where the kinds places know of come from."""
    global _provider
    _provider = provider


def place_kinds() -> list[PlaceKind]:
    if _provider is None:
        raise RuntimeError("no kinds of model are known yet: import ocibridge.kinds before locating a text")
    return list(_provider())


def loaded(named: tuple[str, str]) -> Any:
    """The function a kind named, its module imported now (the kind's, never this package's choice)."""
    module, function = named
    return getattr(importlib.import_module(module), function)


def by_scheme(text: str) -> PlaceKind | None:
    return next((k for k in place_kinds() if any(text.startswith(s) for s in k.schemes)), None)


def by_name(name: str) -> PlaceKind | None:
    return next((k for k in place_kinds() if k.name == name), None)


def file_suffixes() -> tuple[str, ...]:
    return tuple(s for k in place_kinds() for s in k.suffixes)
