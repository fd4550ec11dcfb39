"""serve's one access gate and its one table of failures (hubserver/access.py, failures.py): every
decision of who may do what raises :class:`Denied`, every exception a route lets out is answered
by one row, for the API and the pages alike. No server or registry: the decisions themselves."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.access import Access, Denied, Gate, Signer
from ocibridge.hubserver.failures import TABLE, failure_of
from ocibridge.hubserver.repo.commits import BadCommit, MissingEntry, StaleParent, UnknownContent
from ocibridge.hubserver.repo.sources import Refused, RepoNotFound, RevisionNotFound
from ocibridge.hubserver.settings import ServeSettings
from ocibridge.hubserver.signedchecks import require_signed, require_token
from ocibridge.hubserver.uploads.staging import StagingFull


def request(token: str | None = None, query: str = "", cookie: str | None = None) -> Request:
    headers = [] if token is None else [(b"authorization", f"Bearer {token}".encode())]
    if cookie is not None:
        headers.append((b"cookie", f"ocibridge_session={cookie}".encode()))
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers,
                    "query_string": query.encode()})


def denied(call, *args) -> tuple[int, str]:
    with pytest.raises(Denied) as caught:
        call(*args)
    return caught.value.status, str(caught.value)


def test_an_open_server_lets_anyone_read_and_nobody_write():
    gate = Gate()
    assert gate.require(request(), "acme/m", Access.READ) is None
    status, message = denied(gate.require, request("anything"), "acme/m", Access.WRITE)
    assert status == 401 and "holds none" in message
    assert gate.page_allowed(request())


def test_reads_need_a_known_token():
    gate = Gate(["r0"])
    assert denied(gate.require, request(), "acme/m", Access.READ)[0] == 401
    status, message = denied(gate.require, request("wrong"), "acme/m", Access.READ)
    assert (status, message) == (401, "Invalid credentials in Authorization header")
    grant = gate.require(request("r0"), "acme/m", Access.READ)
    assert grant is not None and not grant.write


def test_writes_need_a_write_token_within_its_prefix():
    gate = Gate(["r0", "w0 write acme/ alice"])
    assert denied(gate.require, request(), "acme/m", Access.WRITE)[0] == 401
    status, message = denied(gate.require, request("r0"), "acme/m", Access.WRITE)
    assert status == 403 and "reads only" in message
    status, message = denied(gate.require, request("w0"), "other/m", Access.WRITE)
    assert status == 403 and "under acme/" in message
    grant = gate.require(request("w0"), "acme/m", Access.WRITE)
    assert grant is not None and grant.name == "alice"
    assert gate.require(request("w0"), "acme/m", Access.READ) is not None  # a write token reads its prefix...
    assert denied(gate.require, request("w0"), "other/m", Access.READ)[0] == 404  # ... only (test_serve_scopes.py)
    assert gate.who(request("r0")).whoami()["auth"]["accessToken"]["role"] == "read"
    assert denied(gate.who, request("nobody"))[0] == 401


def test_signed_urls_and_granted_tokens_are_decided_by_the_gate():
    signer = Signer([b"t", b"u"], clock=lambda: 1000.0)
    c1, c2 = signer.client_of("t"), signer.client_of("u")  # what a grant names: a served token's client
    url = signer.signed("/ocibridge/lfs/x", signer.expiry(), c1)
    query = url.split("?", 1)[1]
    assert require_signed(signer, request(query=query), "/ocibridge/lfs/x", "no") == c1
    assert denied(require_signed, signer, request(query=query), "/ocibridge/lfs/y", "no") == (403, "no")
    token, _ = signer.grant("acme/m@abc", c2)
    assert require_token(signer, request(token), "acme/m@abc", "access") == c2
    stranger, _ = signer.grant("acme/m@abc", "c3")  # signed, but for no client serve knows
    assert denied(require_token, signer, request(stranger), "acme/m@abc", "access")[0] == 401
    assert denied(require_token, signer, request(token), "acme/m@def", "access") == \
        (401, "Invalid or expired Xet access token")


def test_the_pages_take_only_a_session_of_a_served_token():
    gate = Gate(["r0"])
    assert not gate.page_allowed(request())
    assert gate.session_for("wrong") is None
    session = gate.session_for("r0")
    assert session is not None and session != "r0"  # the cookie holds no token
    assert gate.page_allowed(request(cookie=session))
    assert gate.page_allowed(request(cookie=session), "acme/m")  # a token without a prefix reads every repository
    assert not gate.page_allowed(request(cookie="0" * 64), "acme/m")
    assert not gate.page_allowed(request("r0"))  # a bearer token is no page login


@pytest.mark.parametrize(("error", "status", "code"), [
    (RepoNotFound("x"), 404, "RepoNotFound"),
    (RevisionNotFound("x"), 404, "RevisionNotFound"),
    (Refused("x"), 403, "GatedRepo"),
    (StaleParent("x"), 412, None),
    (MissingEntry("x"), 404, "EntryNotFound"),
    (BadCommit("x"), 400, "BadRequest"),
    (UnknownContent("x"), 422, "BadRequest"),
    (StagingFull("x"), 507, None),
    (OcibridgeError("x"), 502, None),
    (Denied(403, "x"), 403, None),
])
def test_one_table_answers_every_failure(error, status, code):
    failure = failure_of(error)
    said = "Repository not found" if code == "RepoNotFound" else "x"  # the Hub's words, whatever the source said
    assert (failure.status, failure.code, failure.message) == (status, code, said)
    assert failure.title


def test_the_table_puts_each_error_before_its_base():
    """First match wins: a row below one of its bases would never be reached."""
    kinds = [row[0] for row in TABLE]
    for i, kind in enumerate(kinds):
        assert not any(issubclass(kind, earlier) for earlier in kinds[:i]), kind


def test_the_settings_offer_parts_from_their_minimum():
    settings = ServeSettings(lfs_multipart_min=100, lfs_part_size=40)
    assert settings.part_size_for(99) is None
    assert settings.part_size_for(100) == 40
    assert settings.part_size_for(40 * 10_000 + 1) == 41  # at most 10,000 parts
    assert ServeSettings(lfs_multipart_min=None).part_size_for(1 << 40) is None
    assert ServeSettings(public_url="https://hub.example").base("http://127.0.0.1:8080/") == "https://hub.example"
