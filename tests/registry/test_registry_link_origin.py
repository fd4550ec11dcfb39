"""A listing's ``Link: <…>; rel="next"`` names the registry's own origin or is refused (issue 85):
a registry that links its catalog's or tag list's next page to another host (or scheme) gets one
error, and the other host no request at all, credentials or not (stores/registry/nextpage.py).
Before, the page was fetched: without the Authorization header (the auth layer's same-origin
rule held), but from a host the user never named, and its names listed as the registry's."""

from __future__ import annotations

import base64
import http.server
import json
from collections.abc import Callable, Iterator

import pytest
from support.tiny_http import TinyServer, send

from ocibridge.errors import RegistryError
from ocibridge.stores.registry.options import RegistryOptions

SECRET = "Basic " + base64.b64encode(b"alice:s3cret").decode()


class Recorder(TinyServer):
    """A loopback HTTP server that answers every GET with a listing and ``link`` (a function of
    the request's path giving a Link header, or None), recording each request's Authorization;
    ``basic``: ask for Basic credentials first, as a registry with a password does."""

    def __init__(self, link: Callable[[str], str | None], basic: bool) -> None:
        self.seen: list[tuple[str, str | None]] = []

        def answer(handler: http.server.BaseHTTPRequestHandler) -> None:
            sent = handler.headers.get("Authorization")
            self.seen.append((handler.path, sent))
            if basic and sent != SECRET:
                send(handler, 401, b"", {"WWW-Authenticate": 'Basic realm="test"'})
                return
            body = b"" if handler.path == "/v2/" else json.dumps(
                {"repositories": ["acme/one"], "name": "acme/m", "tags": ["v1"]}).encode()
            target = link(handler.path)
            send(handler, 200, body, {"Content-Type": "application/json", **({"Link": target} if target else {})})

        super().__init__(answer)


@pytest.fixture
def pair() -> Iterator[tuple[Recorder, Recorder]]:
    """(the registry, the other host its Links name): the registry, behind a password, links every
    listing's next page to the other host (an absolute URL, another port)."""
    elsewhere = Recorder(lambda path: None, basic=False)
    registry = Recorder(lambda path: None if path == "/v2/" else
                        f'<http://{elsewhere.host}{path.split("?")[0]}?last=acme%2Fone&n=1000>; rel="next"',
                        basic=True)
    yield registry, elsewhere
    registry.close()
    elsewhere.close()


def _options() -> RegistryOptions:
    return RegistryOptions(username="alice", password="s3cret", plain_http=True, max_retries=0)


def test_a_catalog_or_tag_list_linked_to_another_host_is_refused_and_that_host_asked_nothing(pair):
    from ocibridge.oci.reference import RegistryReference
    from ocibridge.stores.registry.store import open_repository
    from ocibridge.stores.registry.v2catalog import list_catalog

    registry, elsewhere = pair
    with open_repository(RegistryReference(registry.host, "acme/m"), _options()) as store:
        with pytest.raises(RegistryError, match="next page is on another origin") as refused:
            list_catalog(store.client)
        assert elsewhere.host in str(refused.value) and "\n" not in str(refused.value)
        with pytest.raises(RegistryError, match="next page is on another origin"):
            store.tags()
    assert any(sent == SECRET for _, sent in registry.seen)  # the registry was asked with the password
    assert elsewhere.seen == []  # the other host: not a request, with credentials or without


def test_a_next_page_on_the_registry_host_over_another_scheme_is_refused():
    from ocibridge.oci.reference import RegistryReference
    from ocibridge.stores.registry.store import open_repository

    own: list[str] = []  # the server's host, known once it listens
    registry = Recorder(lambda path: None if path == "/v2/" else f'<https://{own[0]}{path}>; rel="next"',
                        basic=True)
    own.append(registry.host)
    try:
        with open_repository(RegistryReference(registry.host, "acme/m"), _options()) as store, \
                pytest.raises(RegistryError, match="next page is on another origin"):
            store.tags()
        assert {path for path, _ in registry.seen if "tags" in path} == {"/v2/acme/m/tags/list?n=1000"}
    finally:
        registry.close()


def test_serve_lists_the_pages_of_its_own_registry_and_says_why_it_stopped(pair, caplog):
    from ocibridge.hubserver.repo.sources import RegistrySource

    registry, elsewhere = pair
    source = RegistrySource(registry.host, "acme", _options())
    assert source.repo_ids() == ["one"]  # the first page's, the registry's own
    assert elsewhere.seen == []
    assert "next page is on another origin" in caplog.text
