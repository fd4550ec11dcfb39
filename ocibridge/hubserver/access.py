"""Who may do what, decided in one place: :meth:`Gate.require` (a request's bearer token, for READ
or WRITE of a repository), :func:`require_signed` (a URL serve signed: an LFS upload, a xorb),
:func:`require_token` (a Xet token serve granted), :meth:`Gate.page_allowed` (the login
cookie of the pages). Each raises :class:`Denied` (401 or 403), which the one table of
:mod:`.failures` answers. Reading a token file's line is here too, so a scope is one place.

What each token of ``--token-file`` may do: read every repository, or also write those under a
repo-id prefix (the Hub's write API, :mod:`.writes`). One token a line:

    TOKEN                       read
    TOKEN read                  read
    TOKEN write                 read everything, write every repository
    TOKEN write acme/           read everything, write repositories whose id starts with acme/
    TOKEN write acme/ alice     ... and commits it makes are by "alice" (whoami's name)

The name (what ``whoami`` answers and the author a commit records) is the fourth field, else
``token-`` and the first 8 hex digits of the token's SHA-256, so a secret never appears in a
manifest. A write prefix ``*`` is every repository (to name the token without a prefix).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from ocibridge.errors import UsageError
from ocibridge.hubserver.answers import bearer, number

SCOPES = ("read", "write")
#: the pages' login cookie (:mod:`.web.auth` sets it)
COOKIE = "ocibridge_session"
#: seconds what serve grants (a Xet token, a signed URL) is good for
TOKEN_LIFE = 3600


class Access(enum.Enum):
    """What a request asks of a repository."""

    READ = "read"
    WRITE = "write"


class Denied(Exception):
    """A request refused by :class:`Gate`: 401 (no one serve knows) or 403 (not this)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Grant:
    """One token line, parsed."""

    token: str
    write: bool = False
    prefix: str = ""  # the repo ids it writes start with this ("": every one)
    name: str = ""

    def may_read(self, repo_id: str | None) -> bool:
        """Every token reads every repository (issue 61 scopes reads here, at a ``/`` boundary)."""
        return True

    def may_write(self, repo_id: str) -> bool:
        return self.write and repo_id.lower().startswith(self.prefix.lower())

    def whoami(self) -> dict[str, Any]:
        """``GET /api/whoami-v2`` as huggingface_hub reads it (``hf auth whoami``: name, role)."""
        role = "write" if self.write else "read"
        token: dict[str, Any] = {"displayName": self.name, "role": role}
        if self.write and self.prefix:
            token["repoPrefix"] = self.prefix  # serve's own: what this write token may write
        return {"type": "user", "id": self.name, "name": self.name, "fullname": self.name, "orgs": [],
                "auth": {"type": "access_token", "accessToken": token}}


def parse_line(line: str, where: str = "--token-file") -> Grant:
    """One line of the token file (the module's docstring); :class:`UsageError` when malformed."""
    fields = line.split()
    if not fields or len(fields) > 4:
        raise UsageError(f"{where}: expected 'TOKEN [read|write] [REPO-PREFIX] [NAME]', got {len(fields)} fields")
    token = fields[0]
    scope = fields[1] if len(fields) > 1 else "read"
    if scope not in SCOPES:
        raise UsageError(f"{where}: scope {scope!r}: expected read or write")
    prefix = fields[2] if len(fields) > 2 else ""
    if scope == "read" and prefix:
        raise UsageError(f"{where}: a read token reads every repository: a prefix goes with write")
    name = fields[3] if len(fields) > 3 else "token-" + hashlib.sha256(token.encode()).hexdigest()[:8]
    return Grant(token, scope == "write", "" if prefix == "*" else prefix, name)


def parse_lines(lines: Sequence[str]) -> list[Grant]:
    return [parse_line(line, f"--token-file line {n}") for n, line in enumerate(lines, 1)]


def find(grants: Sequence[Grant], given: str) -> Grant | None:
    """The grant of the token ``given`` (compared in constant time), or None."""
    if not given:
        return None
    sent = given.encode()
    found = None
    for grant in grants:
        if hmac.compare_digest(sent, grant.token.encode()):
            found = grant
    return found


class Signer:
    """Access tokens and URLs, signed with a key made from ``tokens``.

    Every replica reading the same token file makes the same key, so a token one replica grants
    is good at another. With no tokens the server is open, and so is this. A grant names the
    client it was made for (:meth:`client_of` its bearer token), and so do the xorb URLs made
    from it: that name is the client's share of the send permits (:class:`.guard.Shares`)."""

    def __init__(self, tokens: Sequence[bytes], clock: Callable[[], float] = time.time,
                 purpose: bytes = b"ocibridge-xet-grant"):
        self.key = hashlib.sha256(purpose + b"\0" + b"\0".join(sorted(tokens))).digest() if tokens else None
        self.clock = clock

    def _sign(self, text: str) -> str:
        assert self.key is not None
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def client_of(self, token: str) -> str:
        """A short name of a bearer token (what a grant and its URLs carry; the token itself never
        appears in a URL); "" on an open server, where every client is anonymous."""
        if self.key is None:
            return ""
        return self._sign(f"client {token}")[:16]

    def expiry(self) -> int:
        """When what is granted now expires (Unix seconds)."""
        return int(self.clock()) + TOKEN_LIFE

    def grant(self, scope: str, client: str = "") -> tuple[str, int]:
        """A token for ``scope`` (a repo's commit) and ``client``, and when it expires."""
        expires = self.expiry()
        if self.key is None:
            return "open", expires
        return f"{expires}.{client}.{self._sign(f'token {scope} {expires} {client}')}", expires

    def granted(self, token: str, scope: str) -> str | None:
        """The client a valid token for ``scope`` was granted to; None when it is not valid."""
        if self.key is None:
            return ""
        expires, _, rest = token.partition(".")
        client, _, sig = rest.partition(".")
        if (number(expires) or 0) <= self.clock():
            return None
        good = hmac.compare_digest(sig.encode(), self._sign(f"token {scope} {expires} {client}").encode())
        return client if good else None

    def allows(self, token: str, scope: str) -> bool:
        return self.granted(token, scope) is not None

    def signed(self, path: str, expires: int, client: str = "") -> str:
        """``path`` with the query that lets ``client`` fetch it without a header until ``expires``."""
        if self.key is None:
            return path
        return f"{path}?expires={expires}&client={client}&signature={self._sign(f'url {path} {expires} {client}')}"

    def url_allowed(self, path: str, expires: str | None, signature: str | None, client: str | None = "") -> bool:
        if self.key is None:
            return True
        if expires is None or signature is None or client is None or (number(expires) or 0) <= self.clock():
            return False
        return hmac.compare_digest(signature.encode(), self._sign(f"url {path} {expires} {client}").encode())


class Gate:
    """Every access decision of serve, from the token file's lines (none: reads are open)."""

    def __init__(self, lines: Sequence[str] = ()):
        self.grants = parse_lines(lines)
        self.tokens = [g.token.encode() for g in self.grants]
        self.xet = Signer(self.tokens)  # Xet access tokens and xorb URLs: any read token's client
        self.uploads = Signer([g.token.encode() for g in self.grants if g.write])  # LFS upload URLs
        self._session_key = secrets.token_bytes(32)  # a restart signs every page visitor out
        self._sessions = {self._session(g.token.encode()): g for g in self.grants}  # cookie -> its grant

    # -- bearer tokens -------------------------------------------------------------------------
    def require(self, request: Request, repo_id: str | None, access: Access) -> Grant | None:
        """The grant of the request's token for ``access`` to ``repo_id`` (None: any repository);
        raises :class:`Denied`. READ on an open server (no token file) is None: anyone reads."""
        if access is Access.WRITE:
            return self._writer(request, repo_id)
        if not self.grants:
            return None
        given = bearer(request)
        grant = find(self.grants, given)
        if grant is None:
            if not given:
                raise Denied(401, "no token was sent: this server wants 'Authorization: Bearer TOKEN' "
                             "(huggingface_hub: HF_TOKEN or token=)")
            raise Denied(401, "Invalid credentials in Authorization header")
        if not grant.may_read(repo_id):
            raise Denied(403, f"You don't have the rights to read {repo_id}")
        return grant

    def _writer(self, request: Request, repo_id: str | None) -> Grant:
        given = bearer(request)
        grant = find(self.grants, given)
        if grant is None:
            if not any(g.write for g in self.grants):
                raise Denied(401, "writes need a write token: serve's --token-file holds none "
                             "(a line 'TOKEN write [REPO-PREFIX]', docs/serve.md)")
            raise Denied(401, "no token was sent: writes need 'Authorization: Bearer TOKEN'" if not given
                         else "Invalid credentials in Authorization header")
        if not grant.write:
            raise Denied(403, "You don't have the rights to write here: this token reads only")
        if repo_id is not None and not grant.may_write(repo_id):
            raise Denied(403, f"You don't have the rights to write to {repo_id}: this token writes "
                         f"repositories under {grant.prefix!r}")
        return grant

    def who(self, request: Request) -> Grant:
        """The grant of the request's token, whatever it may do (``whoami``); raises :class:`Denied`."""
        grant = find(self.grants, bearer(request))
        if grant is None:
            raise Denied(401, "Invalid user token." if bearer(request) else "no token was sent")
        return grant

    # -- the pages' cookie ---------------------------------------------------------------------
    @property
    def pages_need_login(self) -> bool:
        return bool(self._sessions)

    def _session(self, token: bytes) -> str:
        return hmac.new(self._session_key, token, hashlib.sha256).hexdigest()

    def page_allowed(self, request: Request, repo_id: str | None = None) -> bool:
        """The request's cookie is a session of a served token that reads ``repo_id`` (None: any
        page; no token file: pages are open)."""
        if not self._sessions:
            return True
        given = request.cookies.get(COOKIE, "")
        found = [g for s, g in self._sessions.items() if hmac.compare_digest(given, s)]
        return bool(found) and found[0].may_read(repo_id)

    def session_for(self, token: str) -> str | None:
        """The cookie's value for ``token``, None when no such token is served."""
        value = self._session(token.encode())
        return value if any(hmac.compare_digest(value, s) for s in self._sessions) else None


# -- what serve granted: decided here, whoever holds the signer ----------------------------------
def require_signed(signer: Signer, request: Request, path: str, refused: str) -> str:
    """The client a URL ``signer`` signed for ``path`` names (its query); raises :class:`Denied`
    (403, ``refused``) when it is not signed so, or has expired."""
    q = request.query_params
    client = q.get("client", "")
    if not signer.url_allowed(path, q.get("expires"), q.get("signature"), client):
        raise Denied(403, refused)
    return client


def require_upload_url(signer: Signer, request: Request, path: str) -> None:
    """An LFS upload URL (one PUT, a part, a completion): signed for a write token, never open."""
    refused = "this upload URL is not signed by serve, or has expired: ask the batch API again"
    if not signer.key:
        raise Denied(403, refused)
    require_signed(signer, request, path, refused)


def require_token(signer: Signer, request: Request, scope: str, what: str) -> str:
    """The client a Xet token (``what``: access, write) for ``scope`` was granted to; raises
    :class:`Denied` (401) when the request's bearer is no valid one."""
    client = signer.granted(bearer(request), scope)
    if client is None:
        raise Denied(401, f"Invalid or expired Xet {what} token")
    return client
