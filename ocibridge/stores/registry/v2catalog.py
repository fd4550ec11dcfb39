"""A registry's catalog (``GET /v2/_catalog``): every repository name, page by page.

distribution and most registries answer it (some only to an admin: ``registry:catalog:*``); pages
follow the ``Link: <…>; rel="next"`` header, as the distribution spec says, on the registry's own
origin only (nextpage.py), each capped by the bounded body reader of the client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ocibridge.errors import RegistryError
from ocibridge.stores.registry.client import RegistryClient
from ocibridge.stores.registry.nextpage import listing_pages

#: repositories asked for per page (distribution serves up to 1000 by default)
PAGE = 1000
#: pages followed at most: a million repositories, or a registry that links back to itself
MAX_PAGES = 1000


@dataclass(frozen=True)
class CatalogPage:
    """One page of the catalog: its names under the prefix, and what comes after it."""

    names: list[str]
    #: the next page's URL; None: this was the last (or ``stopped`` says why no more is read)
    following: str | None
    #: the next page is linked elsewhere than the registry's origin: nothing more is asked
    stopped: RegistryError | None = None


def catalog_pages(client: RegistryClient, prefix: str = "", *, page_size: int = PAGE,
                  what: str | None = None) -> Iterator[CatalogPage]:
    """The catalog's pages in order, each asked for only when the caller takes it (the caller
    says how many it reads). Raises :class:`RegistryError` when the registry refuses the
    catalog (its status kept, so a 401 is told to log in) or answers what is no catalog;
    ``what`` names the catalog in the refusal of a next page on another origin."""
    head = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    pages = listing_pages(
        lambda url, params: client.send("GET", url, scopes=("registry:catalog:*",), params=params),
        "/v2/_catalog", page_size, "repositories", client.origin, what or f"registry {client.host} catalog",
        lambda response: client.error(response, "catalog (listing repositories)"),
        lambda e: RegistryError(f"registry {client.host} catalog: not a catalog answer ({e})"))
    for page in pages:
        under = [n for n in page.entries if isinstance(n, str) and n.startswith(head)]
        yield CatalogPage(under, page.following, page.stopped)


def list_catalog(client: RegistryClient, prefix: str = "", *, max_pages: int = MAX_PAGES) -> list[str]:
    """The repository names under ``prefix`` (a path, no trailing slash; "" for all), sorted.
    Raises :class:`RegistryError` when the registry refuses the catalog, or its pages run on
    past ``max_pages`` or to another origin."""
    found: set[str] = set()
    for count, page in enumerate(catalog_pages(client, prefix), 1):
        found.update(page.names)
        if page.stopped is not None:
            raise page.stopped
        if page.following is None:
            return sorted(found)
        if count >= max_pages:
            break
    raise RegistryError(f"registry {client.host} catalog: more than {max_pages} pages, stopped")
