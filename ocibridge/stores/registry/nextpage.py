"""A registry listing's pages (``/v2/_catalog``, ``/v2/NAME/tags/list``), read in one place: each
page's list under its JSON key, and the next page, the target of its ``Link: <url>; rel="next"``
header (RFC 8288), kept to the registry's own origin.

A next page is more of the same listing from the same registry; a Link naming another scheme,
host or port is the registry pointing its client somewhere the user never named, and it is
refused (one :class:`RegistryError`) rather than followed. Following it without credentials,
as the auth layer would (auth.py sends Authorization to the registry's origin only), still
hands the listing to whoever answers there (names the user would take for their registry's)
and makes the client a requester of any URL a hostile registry likes; followed with them, it
would leak the registry's credentials (and a certs.d client certificate, which this client
presents on every TLS connection). It is the same-origin rule auth.py keeps for credentials,
applied to the page itself; registries write relative links (distribution:
``</v2/_catalog?last=…&n=…>``), which always pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import httpx

from ocibridge.core import boundedjson
from ocibridge.errors import RegistryError
from ocibridge.stores.registry.transport import Origin


def next_link(response: httpx.Response) -> str | None:
    """The target of ``Link: <url>; rel="next"`` as written, if any."""
    for part in response.headers.get_list("link"):
        for link in part.split(","):
            params = [p.strip().lower().replace('"', "") for p in link.split(";")[1:]]
            if "rel=next" in params:
                start, end = link.find("<"), link.find(">")
                if 0 <= start < end:
                    return link[start + 1: end]
    return None


def next_page(response: httpx.Response, origin: Origin, what: str) -> str | None:
    """The absolute URL of the page after ``response`` (None: it was the last), refused with a
    :class:`RegistryError` naming ``what`` (``registry HOST catalog``) when it is on another
    origin than the registry's."""
    link = next_link(response)
    if link is None:
        return None
    url = urljoin(str(response.url), link)
    if not origin.same(url):
        shown = url if len(url) <= 200 else url[:200] + "…"
        raise RegistryError(f"{what}: its next page is on another origin ({shown!r}), not {origin.base}: "
                            "not followed (a listing's pages are the registry's own)", 502)
    return url


@dataclass(frozen=True)
class ListingPage:
    """One page of a listing: its entries as the registry wrote them (the caller keeps those it
    can use), and what comes after it."""

    entries: list[Any]
    #: the next page's URL; None: this was the last (or ``stopped`` says why no more is read)
    following: str | None
    #: the next page is linked elsewhere than the registry's origin: nothing more is asked
    stopped: RegistryError | None = None
    #: the first answer said there is no such listing (``refused`` gave no error for it)
    absent: bool = False


def listing_pages(send: Callable[[str, dict[str, str] | None], httpx.Response], first: str, page_size: int,
                  key: str, origin: Origin, what: str, refused: Callable[[httpx.Response], RegistryError | None],
                  malformed: Callable[[Exception], RegistryError]) -> Iterator[ListingPage]:
    """The pages of the listing at ``first``, each asked for (``send(url, params)``) only when the
    caller takes it; the caller says how many it reads. An answer other than 200 raises what
    ``refused`` makes of it (None: the listing is absent, one last page says so); a body whose
    ``key`` is no list raises ``malformed``'s error; ``what`` names the listing in the refusal of
    a next page on another origin."""
    url: str | None = first
    params: dict[str, str] | None = {"n": str(page_size)}
    while url is not None:
        response = send(url, params)
        if response.status_code != 200:
            error = refused(response)
            if error is not None:
                raise error
            yield ListingPage([], None, absent=True)
            return
        try:
            entries = boundedjson.loads(response.content).get(key) or []
            if not isinstance(entries, list):
                raise ValueError(f"{key!r} is not a list")
        except (ValueError, AttributeError) as e:
            raise malformed(e) from None
        try:
            url = next_page(response, origin, what)
        except RegistryError as e:
            yield ListingPage(entries, None, e)
            return
        yield ListingPage(entries, url)
        params = None
