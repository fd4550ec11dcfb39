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
    OllamaReference,
    is_layout_reference,
    is_ollama_reference,
    parse_layout_reference,
    parse_ollama_reference,
    parse_registry_reference,
)
from ocibridge.stores.base import WritableStore, close_store

if TYPE_CHECKING:
    from ocibridge.stores.registry.options import RegistryOptions

STORE_ENV = "OCIBRIDGE_STORE"


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


def open_store_target(text: str, *, for_write: bool = False,
                      options: RegistryOptions | None = None, **values: Any) -> StoreTarget:
    """Open the store a reference names; ``options`` say how to reach a registry (keyword
    ``values`` change some of its fields: ``plain_http=True``). Registry and Ollama stores are
    imported lazily."""
    if is_layout_reference(text):
        from ocibridge.stores.layout import LayoutStore  # here: a copy between registries needs none of it

        ref = parse_layout_reference(text)
        store = LayoutStore(os.path.expanduser(ref.path), create=for_write)
        return _opened(StoreTarget(store, ref.reference, ref.tag or (None if ref.digest else DEFAULT_TAG), text))
    if is_ollama_reference(text):
        return open_ollama_target(text, for_write=for_write, options=_with_values(options, values))
    local = local_store_reference(text)
    if local is not None:  # the one name rule: a model of the local store by its bare name
        return open_store_target(local, for_write=for_write, options=options, **values)
    if os.path.exists(text) or _path_like(text):  # else a directory would be looked up as docker.io/<path>
        raise InvalidReference(_local_path(text, for_write))
    registry_ref = parse_registry_reference(text)
    from ocibridge.stores.registry import open_repository  # issue 3
    from ocibridge.stores.registry.mirrors import open_for_reading

    opener = open_repository if for_write else open_for_reading  # reads may come from a mirror
    registry_store = opener(registry_ref, _with_values(options, values))
    return _opened(StoreTarget(registry_store, registry_ref.reference, registry_ref.tag, text))


#: a bare ``NAME[:TAG]``: no ``/``, no scheme; what Docker would read as docker.io/library/NAME
_BARE_NAME = re.compile(r"^(?P<name>[a-z0-9][a-z0-9._-]{0,127})(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127}))?\Z")


def local_store_reference(text: str) -> str | None:
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
            return f"oci:{store}:{candidate}" if ":" not in candidate else f"oci:{store}@" + \
                LayoutStore(store).resolve(candidate).digest
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


def _path_like(text: str) -> bool:
    """Whether ``text`` is written as a file-system path: no registry reference starts so."""
    return text.startswith(("/", "./", "../", "~")) or text in (".", "..")


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


def open_ollama_target(text: str, *, for_write: bool = False,
                       options: RegistryOptions | None = None) -> StoreTarget:
    """``ollama:NAME`` → the local store ($OLLAMA_MODELS); ``ollama://[host/]NAME`` → a
    registry repository ``namespace/model`` (plain HTTP for loopback hosts). Opened for
    writing, both take Ollama models only (see stores/ollama/guard.py)."""
    ref: OllamaReference = parse_ollama_reference(text)
    name = ref.name
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
