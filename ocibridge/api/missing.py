"""What a registry reference that names nothing may have meant.

A registry answers 404 to the manifest of a tag whether the tag or the whole repository is
missing, so ``pull REG/acme/typo:latest`` said "manifest not found", as for a tag. A call that
ends in :class:`NotFound` asks once more, only then: the repository's tag list (a 404 there is
no such repository, as ``tags`` says) and the registry's catalog, for the names nearest the one
typed (difflib, as ``git`` suggests a command). A registry that refuses its catalog (Docker Hub,
most to anyone but an admin) is told without names. A tag the repository lacks (``:lates``) is
told the same way: no such tag, the tags nearest it, and the repository's tags
(cosign's ``sha256-HEX.sig`` and serve's ``ocibridge-*`` left out: they name no version).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from ocibridge.api.options import TransferOptions
from ocibridge.errors import NotFound, OcibridgeError
from ocibridge.oci.reference import RegistryReference
from ocibridge.stores.opened import closes_its_stores

_Call = TypeVar("_Call", bound=Callable[..., Any])
#: catalog pages read for near names at most (a thousand names each): the error comes first
CATALOG_PAGES = 10
#: near names a refusal offers at most
NEAR_NAMES = 3
#: tags a refusal lists at most
TAGS_SHOWN = 10


def no_such_repository(shown: str) -> str:
    """The one wording of a repository the registry does not know (``tags``, ``pull``...)."""
    return f"{shown}: no such repository (the registry answered 404 to its tag list)"


def explaining_missing(call: _Call) -> _Call:
    """An API call whose first argument is a model reference: a :class:`NotFound` it ends in is
    said as "no such repository" (with the nearest names) when that is why."""

    @functools.wraps(call)
    def run(ref: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(ref, *args, **kwargs)
        except NotFound:
            better = why_missing(ref, kwargs.get("transfer"))
            if better is None:
                raise
            raise NotFound(better) from None

    return run  # type: ignore[return-value]  # same signature, wrapped


@closes_its_stores
def why_missing(ref: object, transfer: TransferOptions | None = None) -> str | None:
    """``no such repository ...; nearest there: ...`` when ``ref`` names a registry repository
    the registry does not know; ``no such tag ...; nearest: ...; its tags: ...`` when the
    repository is there and lacks the tag; None for anything else (a digest, a layout, a failure
    to ask)."""
    from ocibridge.oci.bookkeeping import is_bookkeeping
    from ocibridge.places.locate import Role, locate, text_of
    from ocibridge.places.targets import open_store_target
    from ocibridge.stores.registry.store import RegistryStore

    options = (transfer or TransferOptions()).registry_options()
    try:
        located = locate(ref, Role.MODEL)  # type: ignore[arg-type]  # a str or a Locator, as the call took
        if not isinstance(located, RegistryReference):
            return None
        store = open_store_target(located, options=options).store
        if not isinstance(store, RegistryStore):
            return None
        tags = store.tags()
    except OcibridgeError:
        return None
    if tags:
        if located.digest is None and located.tag is not None and located.tag not in tags \
                and not is_bookkeeping(located.tag):  # a commit id (@<hex>) says its own words
            from ocibridge.stores.tombstones import without_tombstones

            # a tag serve deleted is no tag to offer (one HEAD each, in a repository serve keeps only);
            # one that cannot be asked is listed as it is: the refusal comes first
            with contextlib.suppress(OcibridgeError):
                tags = without_tombstones(store, tags)
            return no_such_tag(text_of(located), located.tag, tags)
        return None
    if not store.repository_unknown:
        return None
    near = nearest_repositories(located, transfer)
    hint = f"; nearest there: {', '.join(f'{located.registry}/{n}' for n in near)}" if near else ""
    return no_such_repository(text_of(located)) + hint


def no_such_tag(shown: str, tag: str, tags: list[str]) -> str:
    """A tag the repository lacks: the nearest of its tags first, then its tags (newest by
    version order first, at most :data:`TAGS_SHOWN`)."""
    import difflib

    from ocibridge.oci.bookkeeping import version_order, version_tags

    versions = version_tags(tags)
    near = difflib.get_close_matches(tag, versions, n=NEAR_NAMES, cutoff=0.6)
    listed = sorted(versions, key=version_order, reverse=True)
    shown_tags = ", ".join(listed[:TAGS_SHOWN]) + (f", ... ({len(listed)} in all)" if len(listed) > TAGS_SHOWN else "")
    hint = f"; nearest: {', '.join(near)}" if near else ""
    return f"{shown}: no such tag {tag} in the repository{hint}; its tags: {shown_tags or 'none but signatures'}"


def nearest_repositories(ref: RegistryReference, transfer: TransferOptions | None = None) -> list[str]:
    """The repositories of ``ref``'s registry nearest its repository (its catalog's first
    :data:`CATALOG_PAGES` pages), closest first; empty when the registry will not list them."""
    import difflib

    from ocibridge.api.browse import list_repositories

    try:
        listed = list_repositories(ref.registry, transfer=transfer, max_pages=CATALOG_PAGES)
    except OcibridgeError:
        return []
    return difflib.get_close_matches(ref.repository, listed.repositories, n=NEAR_NAMES, cutoff=0.6)


def read_on_docker_hub(text: str) -> str:
    """The Docker Hub reference a name without a registry host is read as (Docker's rule), as a
    hint shows it: ``acme/tiny:latest`` is ``docker.io/acme/tiny:latest``."""
    from ocibridge.oci.reference import parse_registry_reference

    ref = parse_registry_reference(text)
    return f"docker.io/{ref.repository}{f':{ref.tag}' if ref.tag else ''}{f'@{ref.digest}' if ref.digest else ''}"
