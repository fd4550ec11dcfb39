"""Opening the store a reference names (parsed by :mod:`ocibridge.oci.reference`).

| form                          | store                                     |
|-------------------------------|-------------------------------------------|
| ``oci:PATH[:TAG\\|@DIGEST]``  | an OCI image layout directory             |
| ``host[:port]/repo[:tag]``    | a registry repository                     |
| ``ollama:NAME``               | the local Ollama store ($OLLAMA_MODELS)   |
| ``ollama://[host/]NAME``      | an Ollama-compatible registry             |

Files and directories are no stores: the source formats (:mod:`ocibridge.kinds.dispatch`) read
and write them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ocibridge.core.environment import STORE as STORE_ENV
from ocibridge.errors import InvalidReference, UsageError
from ocibridge.oci.reference import DEFAULT_TAG, LayoutReference, PathReference, RegistryReference
from ocibridge.places import kinds
from ocibridge.places.locators import KindPlace
from ocibridge.stores.opened import closes_its_stores, closing_opened_stores, remember
from ocibridge.stores.target import SourceTarget, StoreTarget

__all__ = ["SourceTarget", "StoreTarget", "closes_its_stores", "closing_opened_stores", "default_store_path",
           "local_destination", "local_store_reference", "open_source", "open_store_target", "rewrite_if_local"]

if TYPE_CHECKING:
    from ocibridge.chunks.choice import ChunkChoice
    from ocibridge.places.locators import Locator
    from ocibridge.stores.layout import LayoutStore
    from ocibridge.stores.registry.options import RegistryOptions



def default_store_path() -> Path:
    """The embedded default store: ``$OCIBRIDGE_STORE`` or ``$XDG_DATA_HOME/ocibridge/store``."""
    if os.environ.get(STORE_ENV):
        return Path(os.environ[STORE_ENV])
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "ocibridge" / "store"


_Target = TypeVar("_Target", bound=SourceTarget)


def _opened(target: _Target) -> _Target:
    remember(target.store)
    return target


def open_store_target(ref: Locator, *, for_write: bool = False,
                      options: RegistryOptions | None = None, **values: Any) -> StoreTarget:
    """Open the store a locator names: the one dispatch on its type (a text is located first,
    once, at the edge: :func:`ocibridge.places.locate.locate`). ``options`` say how to reach a
    registry (keyword ``values`` change some of its fields: ``plain_http=True``). Registry and
    Ollama stores are imported lazily; a write into the local store first renames what the
    release before named there (:func:`rewrite_if_local`)."""
    options = _with_values(options, values)
    if isinstance(ref, LayoutReference):
        from ocibridge.stores.layout import LayoutStore  # here: a copy between registries needs none of it

        if for_write and not is_local_name(ref):  # the local store makes its own parents
            from ocibridge.core.parentdir import parent_must_exist

            parent_must_exist(ref.path, ref.text)
        store = LayoutStore(os.path.expanduser(ref.path), create=for_write)
        if for_write:
            rewrite_if_local(store)
        tag = ref.tag or (None if ref.digest else DEFAULT_TAG)
        return _opened(StoreTarget(store, ref.reference, tag, ref.text))
    if isinstance(ref, RegistryReference):
        return _open_registry(ref, for_write, options)
    if isinstance(ref, KindPlace) and ref.is_store:  # a kind's store (Ollama's): its kind's opener
        opened: StoreTarget = _opener(ref)(ref, for_write=for_write, options=options)
        return _opened(opened)
    if isinstance(ref, PathReference):  # else a directory would be looked up as docker.io/<path>
        raise InvalidReference(f"{ref.text} is a local path, not a store (oci:PATH[:TAG] or host/repo[:tag])")
    raise InvalidReference(f"{ref.text} is no store: push, copy and convert read it as a source")


def open_source(ref: Locator, *, options: RegistryOptions | None = None,
                chunks: ChunkChoice | None = None) -> SourceTarget:
    """Open what a located model reference reads from: a store (:func:`open_store_target`), or
    the read-only artifact a kind's own place builds (``hf:ORG/NAME``: what a push of it stores,
    with ``chunks``, push's chunk settings; None: its defaults). A store's artifact is read as
    it is: ``chunks`` there is a mistake (the command that takes them says so first)."""
    if isinstance(ref, KindPlace) and not ref.is_store:  # hf:ORG/NAME: its kind's opener builds it
        built: SourceTarget = _opener(ref)(ref, for_write=False, options=options, chunks=chunks)
        return _opened(built)
    if chunks is not None:
        raise UsageError(f"{ref.text}: a store's artifact is read as it is, its chunk table with it: "
                         "chunk settings are for a source built from files (hf:ORG/NAME)")
    return open_store_target(ref, options=options)


def _opener(ref: KindPlace) -> Any:
    kind = kinds.by_name(ref.kind)
    if kind is None or kind.opener is None:
        raise InvalidReference(f"{ref.text}: no kind {ref.kind!r} opens this place")
    return kinds.loaded(kind.opener)



def _open_registry(ref: RegistryReference, for_write: bool, options: RegistryOptions | None) -> StoreTarget:
    from ocibridge.stores.registry import open_repository
    from ocibridge.stores.registry.mirrors import open_for_reading

    opener = open_repository if for_write else open_for_reading  # reads may come from a mirror
    return _opened(StoreTarget(opener(ref, options), ref.reference, ref.tag, ref.text))


def local_store_reference(text: str) -> LayoutReference | None:
    """The one name rule of every command that takes a model reference: a bare ``NAME[:TAG]``
    (:mod:`ocibridge.stores.local_names`) the local store (the embedded default layout) holds
    means that model, even where a directory of that name exists (a push's source, where a path
    wins, is parsed by :func:`ocibridge.kinds.dispatch.source_reference`). Anything else, or a name
    the store does not hold, is None: Docker's defaults keep their meaning. A name the release
    before wrote is pinned by digest, so a rewrite of the store's names before its use
    (:func:`~ocibridge.stores.local_names.rewrite_legacy`) does not lose it."""
    from ocibridge.stores.local_names import split_local_name

    parsed = split_local_name(text)
    store = default_store_path()
    if parsed is None or not (store / "oci-layout").is_file():
        return None
    from ocibridge.oci.mediatypes import ANNOTATION_REF_NAME
    from ocibridge.stores.layout import LayoutStore
    from ocibridge.stores.local_names import find_local, is_legacy

    layout = LayoutStore(store)
    index = layout.read_index()
    found = find_local(layout, *parsed, index=index)
    if found is None:
        return None
    if not is_legacy(found):
        return LayoutReference(str(store), found, written=text)
    digest = next(e.digest for e in index.manifests if (e.annotations or {}).get(ANNOTATION_REF_NAME) == found)
    return LayoutReference(str(store), None, digest, written=text)


def local_destination(text: str) -> LayoutReference:
    """Where a store destination without a registry host goes: the local store, under the name
    ``NAME[:TAG]`` (as ``docker build -t``, ``kit pack -t`` and ``modctl build -t`` name a local
    model). One error line when ``text`` is no such name."""
    from ocibridge.stores.local_names import split_local_name, stored_name

    named = split_local_name(text)
    if named is None:
        raise InvalidReference(f"invalid local name {text!r}: NAME[:TAG] (lowercase letters, digits, . _ - /), "
                               "oci:PATH[:TAG] or host/repo[:tag]")
    return LayoutReference(str(default_store_path()), stored_name(*named), written=text)


def is_local_name(located: object) -> bool:
    """Whether a locator was made from a bare ``NAME[:TAG]`` of the local store (not ``oci:…``)."""
    return (isinstance(located, LayoutReference) and not located.text.startswith("oci:")
            and os.path.realpath(os.path.expanduser(located.path)) == os.path.realpath(default_store_path()))


def rewrite_if_local(store: LayoutStore) -> None:
    """Before a write into the local store, its names from the release before become
    ``NAME:TAG`` (:func:`~ocibridge.stores.local_names.rewrite_legacy`); other layouts keep theirs."""
    if store.root.resolve() != default_store_path().resolve() or not (store.root / "index.json").is_file():
        return
    from ocibridge.stores.local_names import rewrite_legacy

    rewrite_legacy(store)


def _with_values(options: RegistryOptions | None, values: dict[str, Any]) -> RegistryOptions | None:
    if not values:
        return options
    from ocibridge.stores.registry.options import RegistryOptions

    return (options or RegistryOptions()).updated(values)
