"""The next page of a registry listing (``/v2/_catalog``, ``/v2/NAME/tags/list``): the target of
its ``Link: <url>; rel="next"`` header (RFC 8288), kept to the registry's own origin.

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

from urllib.parse import urljoin

import httpx

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
