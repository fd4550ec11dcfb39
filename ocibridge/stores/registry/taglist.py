"""A repository's tag list, page after page (nextpage.py's pager), bounded: a server that
pages on forever cannot make the list grow without end."""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice

import httpx

from ocibridge.core.environment import MAX_TAGS as ENV_MAX_TAGS
from ocibridge.core.limits import env_limit
from ocibridge.errors import RegistryError, TooLarge
from ocibridge.stores.registry.nextpage import listing_pages
from ocibridge.stores.registry.transport import Origin

TAGS_PAGE_SIZE = 1000
MAX_TAG_PAGES = 10_000
#: Distinct tags held across all pages (each at most 128 bytes on average), raised with
#: $OCIBRIDGE_MAX_TAGS.
MAX_TAGS = 1_000_000


def read_tags(send: Callable[..., httpx.Response], url: str, origin: Origin, host: str, repository: str,
              fail: Callable[[httpx.Response], RegistryError]) -> list[str] | None:
    """Every tag of ``repository`` on ``host`` whose tag list is at ``url`` (sorted), or None when
    the registry answers the first page 404 (no such repository, not an empty list). ``send``
    sends one request, ``fail`` turns a refusal into its error."""
    names: set[str] = set()
    held = 0  # bytes of the distinct tags kept: the total a hostile server can make us hold
    cap_count, cap_bytes = env_limit(ENV_MAX_TAGS, MAX_TAGS), env_limit(ENV_MAX_TAGS, MAX_TAGS) * 128
    pages = listing_pages(lambda page_url, params: send("GET", page_url, params=params), url, TAGS_PAGE_SIZE,
                          "tags", origin, f"registry {host}: tags of {repository}",
                          lambda response: None if response.status_code == 404 and not names else fail(response),
                          lambda e: RegistryError(f"registry {host}: bad tag list: {e}"))
    for page in islice(pages, MAX_TAG_PAGES):
        if page.absent:
            return None
        for name in page.entries:
            if isinstance(name, str) and name not in names:
                names.add(name)
                held += len(name)
        if len(names) > cap_count or held > cap_bytes:
            raise TooLarge(f"{host}/{repository}: more than {cap_count} tags (or {cap_bytes} bytes of "
                           f"them), refused (raise ${ENV_MAX_TAGS} if it is genuine)")
        if page.stopped is not None:
            raise page.stopped
    return sorted(names)
