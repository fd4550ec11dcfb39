"""Who sees what (issue 61), decided by serve's access gate alone: read scopes at a ``/``
boundary, the token file (its lines, its errors, its reload), page cookies tied to a token's
current line, and what serve granted a token ending with it. No server or registry here: the
routes and pages are walked against a running serve in tests/serve/test_serve_scoped_routes.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from starlette.requests import Request

from ocibridge.errors import UsageError
from ocibridge.hubserver.access import Access, Denied, Gate, parse_line, within
from ocibridge.hubserver.server import read_tokens
from ocibridge.hubserver.signer import TOKEN_LIFE, Signer
from ocibridge.hubserver.tokenfile import TokenFile


def request(token: str | None = None, cookie: str | None = None) -> Request:
    headers = [] if token is None else [(b"authorization", f"Bearer {token}".encode())]
    if cookie is not None:
        headers.append((b"cookie", f"ocibridge_session={cookie}".encode()))
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers, "query_string": b""})


def status_of(call, *args) -> int:
    with pytest.raises(Denied) as caught:
        call(*args)
    return caught.value.status


@pytest.mark.parametrize(("prefix", "repo", "inside"), [
    ("acme", "acme/x", True), ("acme/", "acme/x", True), ("ACME/", "acme/X", True),
    ("acme", "acme-evil/x", False), ("acme/", "acme-evil/x", False), ("acme", "acmex", False),
    ("acme/", "acme", True), ("", "anything/x", True), ("acme/x", "acme/xy", False), ("acme/x", "acme/x", True),
])
def test_a_prefix_matches_at_a_slash_boundary(prefix, repo, inside):
    assert within(prefix, repo) is inside


@pytest.mark.parametrize("scope", ["read", "write"])
def test_a_token_prefix_without_a_slash_does_not_take_a_longer_org(scope):
    """Issue 62's red-team line: 'acme' must not match 'acme-evil/', for reads and writes."""
    gate = Gate([f"tok {scope} acme"])
    assert gate.require(request("tok"), "acme/m", Access.READ) is not None
    assert status_of(gate.require, request("tok"), "acme-evil/m", Access.READ) == 404
    if scope == "write":
        assert gate.require(request("tok"), "acme/m", Access.WRITE) is not None
        assert status_of(gate.require, request("tok"), "acme-evil/m", Access.WRITE) == 403


def test_a_read_prefix_hides_every_other_repository_as_missing():
    hidden: list[str] = []

    def missing(repo_id: str) -> Exception:
        hidden.append(repo_id)
        return LookupError(f"{repo_id}: no such repository in reg/x")

    gate = Gate(["r read acme/ reader", "all"], missing=missing)
    assert gate.require(request("r"), "acme/m", Access.READ).name == "reader"
    with pytest.raises(LookupError, match="secret/m: no such repository"):
        gate.require(request("r"), "secret/m", Access.READ)
    assert hidden == ["secret/m"]
    assert gate.require(request("all"), "secret/m", Access.READ) is not None
    assert parse_line("r read * named").prefix == ""


def test_an_organisations_full_name_follows_its_name_and_one_without_a_name_is_refused():
    grant = parse_line("t user=u orgs=valid_org_hub:Dummy%20Hub%20Org,labs,x:A:B")
    assert [(o.name, o.fullname) for o in grant.orgs] == [("valid_org_hub", "Dummy Hub Org"), ("labs", ""),
                                                         ("x", "A:B")]
    with pytest.raises(UsageError, match="orgs= ':Acme': the organisation's name comes before ':'"):
        parse_line("t user=u orgs=:Acme")


def test_the_pages_hide_what_the_cookie_may_not_read():
    gate = Gate(["r read acme/"])
    session = gate.session_for("r")
    assert gate.page_allowed(request(cookie=session), "acme/m")
    assert gate.page_allowed(request(cookie=session))  # the catalog: filtered, not refused
    assert status_of(gate.page_allowed, request(cookie=session), "secret/m") == 404
    assert not gate.page_allowed(request(), "secret/m")  # no cookie: the login first, whatever the repo


def write(path: Path, text: str | bytes) -> None:
    """Replace ``path`` as an editor does (a new file renamed over it)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(text if isinstance(text, bytes) else text.encode())
    os.replace(tmp, path)


def test_a_token_file_that_is_not_utf8_names_its_file_and_line(tmp_path):
    path = tmp_path / "tokens.txt"
    path.write_bytes(b"# readers\n\ngood\nbad-\xff-token read\n")
    with pytest.raises(UsageError) as caught:
        read_tokens(str(path))
    assert str(caught.value) == f"--token-file {path} line 4: not UTF-8 text (byte 0xff at column 5)"


def test_one_token_on_two_lines_is_refused_naming_both(tmp_path):
    path = tmp_path / "tokens.txt"
    path.write_text("# ci\ntok write acme/\nother\n\ntok read\n")
    with pytest.raises(UsageError) as caught:
        read_tokens(str(path))
    assert f"--token-file {path} lines 2 and 5 give the same token" in str(caught.value)
    path.write_text("# ci\ntok write acme/\n\nbad read acme/ name extra\n")
    with pytest.raises(UsageError, match="line 4: expected 'TOKEN"):  # the file's own line number
        read_tokens(str(path))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def watched(tmp_path: Path, text: str) -> tuple[Gate, Path, Clock]:
    path = tmp_path / "tokens.txt"
    path.write_text(text)
    clock = Clock()
    return Gate(read_tokens(str(path)), source=TokenFile(str(path), clock=clock)), path, clock


def test_a_removed_token_is_refused_once_the_file_is_looked_at_again(tmp_path):
    gate, path, clock = watched(tmp_path, "keep\ngone write acme/\n")
    assert gate.require(request("gone"), "acme/m", Access.WRITE).name.startswith("token-")
    write(path, "keep\nnew read acme/\n")
    clock.now += 0.5  # looked at most once a second
    assert gate.require(request("gone"), "acme/m", Access.WRITE) is not None
    clock.now += 1
    assert status_of(gate.require, request("gone"), "acme/m", Access.WRITE) == 401
    assert status_of(gate.require, request("gone"), "acme/m", Access.READ) == 401
    assert gate.require(request("new"), "acme/m", Access.READ) is not None
    assert gate.require(request("keep"), "acme/m", Access.READ) is not None


def test_a_cookie_stops_with_its_token_or_a_change_of_its_line(tmp_path):
    gate, path, clock = watched(tmp_path, "a\nb\n")
    a, b = gate.session_for("a"), gate.session_for("b")
    assert gate.page_allowed(request(cookie=a)) and gate.page_allowed(request(cookie=b))
    write(path, "a read other/\n")  # b removed, a narrowed
    clock.now += 2
    assert not gate.page_allowed(request(cookie=b))
    assert not gate.page_allowed(request(cookie=a))  # its line changed: signed in again
    assert gate.page_allowed(request(cookie=gate.session_for("a")), "other/m")


def test_a_broken_token_file_refuses_every_token_and_never_opens_the_server(tmp_path):
    gate, path, clock = watched(tmp_path, "a\n")
    write(path, b"a\n\xfe\n")
    clock.now += 2
    assert status_of(gate.require, request("a"), "acme/m", Access.READ) == 503
    assert status_of(gate.require, request(), "acme/m", Access.READ) == 503
    assert gate.pages_need_login and not gate.page_allowed(request())
    write(path, "a\n")
    clock.now += 2
    assert gate.require(request("a"), "acme/m", Access.READ) is not None


def test_what_serve_granted_a_removed_token_stops_with_it(tmp_path):
    """A Xet token and a xorb URL name their client: once its token is gone they are refused;
    those of a token that stays are good under the old key until they expire."""
    gate, path, clock = watched(tmp_path, "stays\ngoes\n")
    signer = gate.xet
    kept, gone = signer.client_of("stays"), signer.client_of("goes")
    kept_token, _ = signer.grant("acme/m@c", kept)
    gone_token, _ = signer.grant("acme/m@c", gone)
    url = signer.signed("/xet/x", signer.expiry(), gone).split("?", 1)[1]
    query = dict(part.split("=", 1) for part in url.split("&"))
    assert signer.granted(gone_token, "acme/m@c") == gone
    write(path, "stays\nadded\n")
    clock.now += 2
    gate.require(request("stays"), "acme/m", Access.READ)  # any decision looks at the file
    assert signer.granted(kept_token, "acme/m@c") == kept  # the old key, a client still served
    assert signer.granted(gone_token, "acme/m@c") is None
    assert not signer.url_allowed("/xet/x", query["expires"], query["signature"], query["client"])


def test_an_old_key_is_good_only_as_long_as_what_it_signed():
    now = [1000.0]
    signer = Signer([b"a"], clock=lambda: now[0])
    client = signer.client_of("a")
    token, _ = signer.grant("s", client)
    signer.rekey([b"a", b"b"])
    assert signer.granted(token, "s") == client  # signed before the change, still in its hour
    now[0] += TOKEN_LIFE + 1
    signer.rekey([b"a", b"b"])
    assert signer.granted(token, "s") is None


@pytest.mark.parametrize(("content", "said"), [
    (b"ok\n\xff\xfe read\n", "line 2: not UTF-8 text (byte 0xff at column 1)"),
    (b"tok write\nother\ntok read\n", "lines 1 and 3 give the same token"),
])
def test_the_cli_names_the_token_file_and_line_in_one_error_line(tmp_path, content, said):
    """Issue 63 item 4, as a user meets it: ``ocibridge serve`` exits 2 before listening."""
    import subprocess
    import sys

    path = tmp_path / "tokens.txt"
    path.write_bytes(content)
    done = subprocess.run([sys.executable, "-m", "ocibridge", "serve", "127.0.0.1:9/models", "--token-file",
                           str(path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"ocibridge: error: --token-file {path} {said}")


def test_whoami_names_a_read_tokens_prefix_and_the_api_reads_a_token_file(tmp_path):
    gate = Gate(["r read acme/ viewer"])
    token = gate.who(request("r")).whoami()["auth"]["accessToken"]
    assert (token["role"], token["repoPrefix"], token["displayName"]) == ("read", "acme/", "viewer")
    from ocibridge.api.serve import ServeOptions, create_app

    path = tmp_path / "tokens.txt"
    path.write_text("# the file alone, as ocibridge serve --token-file gives it\nw write acme/ ci\n")
    app = create_app(f"oci:{tmp_path / 'layout'}", options=ServeOptions(token_file=str(path)))
    try:
        assert [g.name for g in app.state.serve.gate.grants] == ["ci"]
        assert app.state.serve.gate.source.path == str(path)  # watched
    finally:
        app.state.serve.close()


def test_an_audit_log_of_stdout_is_one_line_a_write(capfd):
    from ocibridge.hubserver.audit import AuditLog

    log = AuditLog("-")
    log.record({"action": "commit", "repository": "acme/m"})
    log.close()  # stdout stays open
    assert capfd.readouterr().out == '{"action":"commit","repository":"acme/m"}\n'


@pytest.mark.parametrize("lines", [
    ("o user=owner write=vault/", "m user=mallory write=mallory/", "k user=keeper write=keeper/,vault/gated",
     "c user=carol private=vault/private", "r user=reader read=pub/", "old read vault/", "anonymous read=*"),
    ("o user=owner write=vault/", "r user=reader"),  # no anonymous line: a request without a token reads nothing
    (),  # no token file: anyone reads, no one is on a gate's list
])
def test_may_take_is_the_rule_a_download_meets(lines):
    """Issue 85: what serve gives by content (a mount, the LFS batch's "no upload needed") is
    decided by :meth:`Gate.may_take`, which answers as a download through the repository's name
    (``require`` for READ, then ``may_fetch``) does, for every token, and for none."""
    kinds = {"vault/private": (True, ""), "vault/gated": (False, "auto"), "vault/manual": (True, "manual"),
             "pub/open": (False, ""), "mallory/x": (False, "")}
    gate = Gate(lines, private=lambda repo: kinds[repo][0], gated=lambda repo: kinds[repo][1])
    seen = set()
    for grant in [*gate.grants, None]:
        for repo in kinds:
            asked = request(None if grant is None else grant.token)
            try:
                gate.require(asked, repo, Access.READ)
                gate.may_fetch(asked, repo)
                downloads = True
            except Denied:
                downloads = False
            assert gate.may_take(grant, repo) is downloads, (grant, repo)
            seen.add(downloads)
    assert seen == {True, False}  # both answers were asked for


def test_a_proxys_gated_or_private_upstream_repository_is_decided_for_the_reader_the_request_was_let_in_as():
    """Gate.upstream_refuses (serve --upstream-allow-gated/-private): the rules of a repository
    made so here, for the reader :meth:`Gate.require` let in, in the request's own context."""
    import contextvars

    gate = Gate(["alice-token user=alice read=* private=gp/", "bob-token user=bob read=*", "anonymous read=*"])

    def refused(token: str | None, private: bool, gated: str) -> int | None:
        def decide() -> int | None:
            gate.require(request(token), "gp/m", Access.READ)
            said = gate.upstream_refuses("gp/m", private=private, gated=gated)
            return None if said is None else said.status
        return contextvars.copy_context().run(decide)

    assert refused("alice-token", True, "") is None and refused("alice-token", False, "manual") is None
    assert refused("bob-token", True, "") == 404 and refused(None, True, "") == 404
    assert refused("bob-token", False, "auto") == 403 and refused(None, False, "auto") == 401
    assert refused("bob-token", False, "") is None
    # no reader decided in this context (nor an open serve): no one
    assert contextvars.copy_context().run(gate.upstream_refuses, "gp/m", private=True, gated="").status == 404
    assert Gate().upstream_refuses("gp/m", private=False, gated="auto").status == 401
