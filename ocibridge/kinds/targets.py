"""Opening the store a reference names (parsed by :mod:`ocibridge.oci.reference`).

| form                          | store                                     |
|-------------------------------|-------------------------------------------|
| ``oci:PATH[:TAG\\|@DIGEST]``  | an OCI image layout directory             |
| ``host[:port]/repo[:tag]``    | a registry repository                     |
| ``ollama:NAME``               | the local Ollama store ($OLLAMA_MODELS)   |
| ``ollama://[host/]NAME``      | an Ollama-compatible registry             |

Files and directories are no stores: the source formats (:mod:`ocibridge.kinds.door`) read
and write them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ocibridge.errors import InvalidReference
from ocibridge.oci.reference import (
    DEFAULT_TAG,
    LayoutReference,
    PathReference,
    RegistryReference,
)
from ocibridge.stores.base import Store, WritableStore, close_store

if TYPE_CHECKING:
    from ocibridge.kinds.locate import Locator
    from ocibridge.stores.registry.options import RegistryOptions

STORE_ENV = "OCIBRIDGE_STORE"


def default_store_path() -> Path:
    """The embedded default store: ``$OCIBRIDGE_STORE`` or ``$XDG_DATA_HOME/ocibridge/store``."""
    if os.environ.get(STORE_ENV):
        return Path(os.environ[STORE_ENV])
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "ocibridge" / "store"


@dataclass
class SourceTarget:
    """A place to read an artifact from, and the tag or digest of it there: a store, or a
    kind's own place that builds the artifact as a read-only store (``hf:ORG/NAME``)."""

    store: Store
    reference: str
    tag: str | None
    text: str  # how the user wrote it, for messages


@dataclass
class StoreTarget(SourceTarget):
    """A store plus the tag or digest within it."""

    store: WritableStore  # layouts, registries and Ollama stores all take writes
    reference: str
    tag: str | None  # what to tag on write (None when pinned by digest only)
    text: str  # how the user wrote it, for messages


#: The stores opened by the API call running in this context (None: outside any).
_OPENED: ContextVar[list[object] | None] = ContextVar("ocibridge_opened_stores", default=None)

_Call = TypeVar("_Call", bound=Callable[..., Any])


@contextlib.contextmanager
def closing_opened_stores() -> Iterator[None]:
    """Every store opened in the block (by :func:`open_store_target`, however deep) is closed at
    its end, whatever happens: an API call leaves no connection pool behind."""
    opened: list[object] = []
    token = _OPENED.set(opened)
    try:
        yield
    finally:
        _OPENED.reset(token)
        for store in reversed(opened):
            close_store(store)


def closes_its_stores(call: _Call) -> _Call:
    """An API function whose result is data: the stores it opens are closed when it returns."""

    @functools.wraps(call)
    def run(*args: Any, **kwargs: Any) -> Any:
        with closing_opened_stores():
            return call(*args, **kwargs)

    return run  # type: ignore[return-value]  # same signature, wrapped


_Target = TypeVar("_Target", bound=SourceTarget)


def _opened(target: _Target) -> _Target:
    opened = _OPENED.get()
    if opened is not None:
        opened.append(target.store)
    return target


def reference_of(ref: str | Locator) -> Locator:
    """A model reference located (:func:`ocibridge.kinds.locate.locate`, role ``MODEL``)."""
    from ocibridge.kinds.locate import Role, locate

    return locate(ref, Role.MODEL)


def open_store_target(ref: str | Locator, *, for_write: bool = False,
                      options: RegistryOptions | None = None, **values: Any) -> StoreTarget:
    """Open the store a locator names: the one dispatch on its type. A text is located here
    (:func:`ocibridge.kinds.locate.locate`: a model reference, or a destination when opened for
    writing); code below the edges passes the locator it was given. ``options`` say how to
    reach a registry (keyword ``values`` change some of its fields: ``plain_http=True``). A kind's
    locator is opened by the opener its line of the table names; registry and kind stores are
    imported lazily."""
    if isinstance(ref, str):
        from ocibridge.kinds.locate import Role, locate

        ref = locate(ref, Role.DESTINATION if for_write else Role.MODEL)
    options = _with_values(options, values)
    if isinstance(ref, LayoutReference):
        from ocibridge.stores.layout import LayoutStore  # here: a copy between registries needs none of it

        store = LayoutStore(os.path.expanduser(ref.path), create=for_write)
        tag = ref.tag or (None if ref.digest else DEFAULT_TAG)
        return _opened(StoreTarget(store, ref.reference, tag, ref.text))
    if isinstance(ref, RegistryReference):
        return _open_registry(ref, for_write, options)
    if isinstance(ref, PathReference):  # else a directory would be looked up as docker.io/<path>
        raise InvalidReference(f"{ref.text} is a local path, not a store (oci:PATH[:TAG] or host/repo[:tag])")
    target = _opened(_kind_opener(ref)(ref, for_write=for_write, options=options))
    if not isinstance(target, StoreTarget):
        raise InvalidReference(f"{ref.text} is no store (it is read by push, copy and convert as a source)")
    return target


def open_source(ref: Locator, *, options: RegistryOptions | None = None) -> SourceTarget:
    """Open what a located model reference reads from: a store (:func:`open_store_target`), or
    the read-only artifact a kind's own place builds (``hf:ORG/NAME``: what a push of it stores)."""
    if isinstance(ref, (LayoutReference, RegistryReference, PathReference)):
        return open_store_target(ref, options=options)
    return _opened(_kind_opener(ref)(ref, options=options))


def _kind_opener(ref: object) -> Callable[..., SourceTarget]:
    """The opener of the kind whose locator ``ref`` is (its line of the table names both)."""
    import importlib

    from ocibridge.kinds import table

    made = (type(ref).__module__, type(ref).__qualname__)
    for line in table.KINDS:
        if line.locator == made and line.opener is not None:
            module, function = line.opener
            opener: Callable[..., SourceTarget] = getattr(importlib.import_module(module), function)
            return opener
    raise InvalidReference(f"{ref}: no store opens it")


def _open_registry(ref: RegistryReference, for_write: bool, options: RegistryOptions | None) -> StoreTarget:
    from ocibridge.stores.registry import open_repository  # issue 3
    from ocibridge.stores.registry.mirrors import open_for_reading

    opener = open_repository if for_write else open_for_reading  # reads may come from a mirror
    return _opened(StoreTarget(opener(ref, options), ref.reference, ref.tag, ref.text))


#: a bare ``NAME[:TAG]``: no ``/``, no scheme; what Docker would read as docker.io/library/NAME
_BARE_NAME = re.compile(r"^(?P<name>[a-z0-9][a-z0-9._-]{0,127})(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127}))?\Z")


def local_store_reference(text: str) -> LayoutReference | None:
    """The one name rule of every command that takes a reference: a bare ``NAME[:TAG]`` that
    names a model in the local store (the embedded default layout) means that model,
    ``oci:STORE:TAG`` (a push into the store tags a model by its name, ``NAME[-VERSION]``;
    ``NAME:latest`` is ``NAME``; ``NAME:TAG`` is the store's tag ``NAME:TAG`` when a layout
    holds one, else ``NAME-TAG``). Anything else, or a name the store does not hold, is None:
    Docker's defaults (and an existing path) keep their meaning."""
    match = _BARE_NAME.match(text)
    if match is None or os.path.exists(text):
        return None
    from ocibridge.stores.layout import LAYOUT_FILE, LayoutStore

    store = default_store_path()
    if not (store / LAYOUT_FILE).is_file():
        return None
    name, tag = match["name"], match["tag"]
    candidates = [name] if tag in (None, DEFAULT_TAG) else [f"{name}:{tag}", f"{name}-{tag}"]
    held = set(LayoutStore(store).tags())
    for candidate in candidates:
        if candidate in held:
            if ":" not in candidate:
                return LayoutReference(str(store), candidate, written=f"oci:{store}:{candidate}")
            digest = LayoutStore(store).resolve(candidate).digest
            return LayoutReference(str(store), None, digest, written=f"oci:{store}@{digest}")
    return None


def local_destination(text: str) -> LayoutReference:
    """Where a store destination without a registry host goes: the local store, under the name
    ``NAME[:TAG]`` (as ``docker build -t``, ``kit pack -t`` and ``modctl build -t`` name a local
    model). One error line when ``text`` is no such name."""
    match = _BARE_NAME.match(text)
    if match is None:
        raise InvalidReference(f"invalid local name {text!r}: NAME[:TAG] (lowercase letters, digits, . _ -), "
                               "oci:PATH[:TAG] or host/repo[:tag]")
    name, tag = match["name"], match["tag"] or DEFAULT_TAG
    stored = name if tag == DEFAULT_TAG else f"{name}-{tag}"
    return LayoutReference(str(default_store_path()), stored, written=text)


def local_tag_shown(name: str | None, stored: str | None) -> str | None:
    """The TAG ``ls`` shows for a local-store entry, the inverse of :func:`local_store_reference`:
    ``latest`` for the stored tag NAME, ``VERSION`` for NAME-VERSION (typed ``NAME:VERSION``),
    else the stored tag itself (typed bare)."""
    if name is None or stored is None:
        return stored
    if stored == name:
        return DEFAULT_TAG
    if stored.startswith(name + "-") and len(stored) > len(name) + 1:
        return stored[len(name) + 1:]
    return stored


def _with_values(options: RegistryOptions | None, values: dict[str, Any]) -> RegistryOptions | None:
    if not values:
        return options
    from ocibridge.stores.registry.options import RegistryOptions

    return (options or RegistryOptions()).updated(values)
