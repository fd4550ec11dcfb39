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

from ocibridge.core.environment import STORE as STORE_ENV
from ocibridge.errors import InvalidReference
from ocibridge.oci import reference as refs
from ocibridge.oci.reference import (
    DEFAULT_TAG,
    LayoutReference,
    OllamaReference,
    PathReference,
    Reference,
    RegistryReference,
)
from ocibridge.stores.base import WritableStore, close_store

if TYPE_CHECKING:
    from ocibridge.stores.registry.options import RegistryOptions



def default_store_path() -> Path:
    """The embedded default store: ``$OCIBRIDGE_STORE`` or ``$XDG_DATA_HOME/ocibridge/store``."""
    if os.environ.get(STORE_ENV):
        return Path(os.environ[STORE_ENV])
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "ocibridge" / "store"


@dataclass
class StoreTarget:
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


def _opened(target: StoreTarget) -> StoreTarget:
    opened = _OPENED.get()
    if opened is not None:
        opened.append(target.store)
    return target


def reference_of(ref: str | Reference) -> Reference:
    """The edge: the text of a store reference, parsed once into a typed :data:`Reference` (a
    typed one passes through): the local store's name rule first (:func:`local_store_reference`),
    then :func:`ocibridge.oci.reference.parse_reference` as a store is meant (Docker's defaults;
    only what is written as a path is one). A source that may be a file or directory (a push's)
    is parsed by :func:`ocibridge.kinds.door.source_reference`."""
    if not isinstance(ref, str):
        return ref
    return refs.parse_reference(ref, store=True, local=local_store_reference)


def open_store_target(ref: str | Reference, *, for_write: bool = False,
                      options: RegistryOptions | None = None, **values: Any) -> StoreTarget:
    """Open the store a reference names: the one dispatch on its scheme. A text is parsed first
    (:func:`reference_of`); ``options`` say how to reach a registry (keyword ``values`` change
    some of its fields: ``plain_http=True``). Registry and Ollama stores are imported lazily."""
    parsed = reference_of(ref)
    if isinstance(parsed, LayoutReference):
        from ocibridge.stores.layout import LayoutStore  # here: a copy between registries needs none of it

        store = LayoutStore(os.path.expanduser(parsed.path), create=for_write)
        tag = parsed.tag or (None if parsed.digest else DEFAULT_TAG)
        return _opened(StoreTarget(store, parsed.reference, tag, parsed.text))
    if isinstance(parsed, OllamaReference):
        return open_ollama_target(parsed, for_write=for_write, options=_with_values(options, values))
    if isinstance(parsed, PathReference):  # else a directory would be looked up as docker.io/<path>
        raise InvalidReference(_local_path(parsed.path, for_write))
    return _open_registry(parsed, for_write, _with_values(options, values))


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


def _local_path(text: str, for_write: bool) -> str:
    """The error for a path given where a store is meant, with how to write it as a layout when
    it is one (``PATH`` or ``PATH:TAG``) or would be made one (a destination)."""
    from ocibridge.stores.layout import LAYOUT_FILE

    path = text
    head, sep, tag = text.rpartition(":")
    if sep and "/" not in tag and not os.path.exists(text):
        path = head  # PATH:TAG
    is_layout = os.path.isfile(os.path.join(os.path.expanduser(path), LAYOUT_FILE))
    hint = f"; as an OCI image layout it is written oci:{text}" if is_layout or for_write else ""
    return f"{text} is a local path, not a store (oci:PATH[:TAG] or host/repo[:tag]){hint}"


def _with_values(options: RegistryOptions | None, values: dict[str, Any]) -> RegistryOptions | None:
    if not values:
        return options
    from ocibridge.stores.registry.options import RegistryOptions

    return (options or RegistryOptions()).updated(values)


def open_ollama_target(ref: str | OllamaReference, *, for_write: bool = False,
                       options: RegistryOptions | None = None) -> StoreTarget:
    """``ollama:NAME`` → the local store ($OLLAMA_MODELS); ``ollama://[host/]NAME`` → a
    registry repository ``namespace/model`` (plain HTTP for loopback hosts). Opened for
    writing, both take Ollama models only (see stores/ollama/guard.py)."""
    if isinstance(ref, str):
        ref = refs.parse_ollama_reference(ref)
    name, text = ref.name, ref.text
    store: WritableStore
    if ref.remote:
        from ocibridge.kinds.ollama.guard import OllamaRegistryStore
        from ocibridge.stores.registry import open_repository

        repository = open_repository(ref.registry_reference(), options)
        store = OllamaRegistryStore(repository, text) if for_write else repository
    else:
        from ocibridge.kinds.ollama.store import OllamaStore, default_models_dir

        store = OllamaStore(default_models_dir(), name, create=for_write, label=text)
    return _opened(StoreTarget(store, ref.reference, name.tag, text))
