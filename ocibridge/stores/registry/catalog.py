"""A registry's catalog (``GET /v2/_catalog``): every repository name, page by page.

distribution and most registries answer it (some only to an admin: ``registry:catalog:*``); pages
follow the ``Link: <…>; rel="next"`` header, as the distribution spec says, on the registry's own
origin only (nextpage.py), each capped by the bounded body reader of the client."""

from __future__ import annotations

from ocibridge.core import boundedjson
from ocibridge.errors import RegistryError
from ocibridge.stores.registry.client import RegistryClient
from ocibridge.stores.registry.nextpage import next_page

#: repositories asked for per page (distribution serves up to 1000 by default)
PAGE = 1000
#: pages followed at most: a million repositories, or a registry that links back to itself
MAX_PAGES = 1000


def list_catalog(client: RegistryClient, prefix: str = "", *, max_pages: int = MAX_PAGES) -> list[str]:
    """The repository names under ``prefix`` (a path, no trailing slash; "" for all), sorted.
    Raises :class:`RegistryError` when the registry refuses the catalog (its status kept, so a 401
    is told to log in)."""
    head = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    found: set[str] = set()
    url = "/v2/_catalog"
    params: dict[str, str] | None = {"n": str(PAGE)}
    for _ in range(max_pages):
        response = client.send("GET", url, scopes=("registry:catalog:*",), params=params)
        if response.status_code != 200:
            raise client.error(response, "catalog (listing repositories)")
        try:
            names = boundedjson.loads(response.content).get("repositories") or []
            if not isinstance(names, list):
                raise ValueError("repositories is not a list")
        except (ValueError, AttributeError) as e:
            raise RegistryError(f"registry {client.host} catalog: not a catalog answer ({e})") from None
        found.update(n for n in names if isinstance(n, str) and n.startswith(head))
        following = next_page(response, client.origin, f"registry {client.host} catalog")
        if following is None:
            return sorted(found)
        url, params = following, None
    raise RegistryError(f"registry {client.host} catalog: more than {max_pages} pages, stopped")
