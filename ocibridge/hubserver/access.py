"""Who may do what, decided in one place: :meth:`Gate.require` (a request's bearer token, for READ
or WRITE of a repository), :func:`require_signed` (a URL serve signed: an LFS upload, a xorb),
:func:`require_token` (a Xet token serve granted), :meth:`Gate.page_allowed` (the login
cookie of the pages), :meth:`Gate.may_take` (bytes reached by their hash, not through their
repository's name: a mount, the LFS batch's "no upload needed"; the same rule as a download).
Each raises :class:`Denied` (401 or 403), which the one table of :mod:`.failures` answers (or,
``may_take``, says no). A token file's line is read by :mod:`.grants`.

What each token of ``--token-file`` may do: read, or read and write (the Hub's write API,
:mod:`.writeroutes`), every repository or those under a repo-id prefix. One token a line:

    TOKEN                       read every repository
    TOKEN read acme/            read repositories under acme/ only (every other one: not found)
    TOKEN write                 read and write every repository
    TOKEN write acme/           read and write repositories under acme/ only
    TOKEN write acme/ alice     ... and commits it makes are by "alice" (whoami's name)

or, as the Hub's tokens are, a user with separate read, write and private-read scopes
(comma-separated prefixes, ``*`` every repository):

    TOKEN user=alice read=* write=alice/,acme/      reads every public repository, writes two namespaces
    TOKEN user=bob                                  reads every public repository and its own private ones
    anonymous read=public/                          requests without a token read public/... (no line: none)

A bare repository name (``create_repo("name")``) lands in the token's namespace, its user name,
as on the Hub. A private repository (``create_repo(private=True)``, :mod:`.visibility`) is read
only by tokens whose private prefixes cover it: by default the new form's write prefixes and its
own ``user/``; the first form reads privately what it reads.

A prefix matches at a ``/`` boundary (:func:`within`): ``acme`` and ``acme/`` both take ``acme/x``,
neither takes ``acme-evil/x``. Every rule is keyed by a repository's key (:mod:`.repo.keys`: a
dataset's is ``datasets/ORG/NAME``), one code for both types: a namespace prefix (``acme/``) takes
its datasets too, ``datasets/acme/`` only those. A repository a token may not read is answered as
a missing one (``missing``), on every route and page, so that its existence does not leak. The
name (what ``whoami`` answers and the author a commit records) is the fourth field, else
``token-`` and the first 8 hex digits of the token's SHA-256, so a secret never appears in a
manifest. A prefix ``*`` is every repository (to name the token without a prefix). One token is
on one line only: two lines for it would leave which one was meant to a guess.

The token file (:mod:`.tokenfile`) is re-read when it changes; what a removed token was given
stops working with it: its bearer at once, its page cookie (an HMAC over its current line) and
what serve granted it (a Xet token, a xorb URL: they name its client) too.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import logging
import secrets
import threading
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from starlette.requests import Request

from ocibridge.errors import UsageError
from ocibridge.hubserver.answers import bearer
from ocibridge.hubserver.grants import ANONYMOUS as ANONYMOUS
from ocibridge.hubserver.grants import SCOPES as SCOPES
from ocibridge.hubserver.grants import Grant as Grant
from ocibridge.hubserver.grants import find as find
from ocibridge.hubserver.grants import parse_line as parse_line
from ocibridge.hubserver.grants import parse_lines as parse_lines
from ocibridge.hubserver.grants import within as within
from ocibridge.hubserver.grants import writes_of
from ocibridge.hubserver.repo.reponames import hub_id, noun
from ocibridge.hubserver.signer import TOKEN_LIFE as TOKEN_LIFE
from ocibridge.hubserver.signer import Signer as Signer

if TYPE_CHECKING:
    from ocibridge.hubserver.tokenfile import TokenFile

log = logging.getLogger("ocibridge.hubserver")

#: the pages' login cookie (:mod:`.web.auth` sets it)
COOKIE = "ocibridge_session"
#: where :meth:`Gate.require` and :meth:`Gate.page_allowed` leave who reads, in a request's scope
READER = "ocibridge.reader"
#: ... and the grant of its bearer token (the audit's token name)
GRANT = "ocibridge.grant"
#: the grant a read was let in with (the anonymous line's for none), as :meth:`Gate.require` or
#: :meth:`Gate.page_allowed` found it, for what the request's answer decides later in a worker thread
#: (a copy of this context): :meth:`Gate.upstream_refuses`. Unset: no reader was decided (refused)
_READING: ContextVar[Grant | None] = ContextVar("ocibridge_reading", default=None)


class Access(enum.Enum):
    """What a request asks of a repository."""

    READ = "read"
    WRITE = "write"


class Denied(Exception):
    """A request refused by :class:`Gate`: 401 (no one serve knows), 403 (not this), 503 (the
    token file cannot be read now: every token refused, never an open server)."""

    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code  # X-Error-Code: GatedRepo for a gate (huggingface_hub's GatedRepoError)


@dataclass(frozen=True)
class _Lines:
    """The token file as last read: its grants, the page cookie of each, or why it is unusable."""

    grants: tuple[Grant, ...] = ()
    sessions: dict[str, Grant] = field(default_factory=dict)  # cookie -> its grant
    broken: str = ""  # why no token is taken now ("": the file was read)
    anonymous: Grant | None = None  # what a request without a token reads (None: nothing)


def _xet_clients(grants: Sequence[Grant]) -> list[bytes]:
    """Whose Xet grants stay good: every token's, and with an anonymous line, requests without a
    token (hf_xet asks the refresh route as huggingface_hub asked resolve: with no token). The
    signing key is made from the tokens alone, never from the anonymous line's empty one."""
    return [g.token.encode() for g in grants]  # the anonymous grant's token is ""


def _ungated(repo_id: str) -> str:
    return ""


def _none_accepted(repo_id: str, user: str) -> bool:
    return False


def _public(repo_id: str) -> bool:
    return False


def _kept(repo_id: str) -> bool:
    return False


def _hidden(repo_id: str) -> Exception:
    return Denied(404, f"{repo_id}: no such repository")


class Gate:
    """Every access decision of serve, from the token file's lines (none: reads are open).

    ``source``: the token file, looked at again (at most once a second) before each decision
    and re-read when it changed; one that cannot be read or parsed then refuses every token
    (503) until it is fixed, rather than opening the server or keeping a removed token.
    ``missing``: what a repository the request may not read is answered as (the catalog's own
    not-found for that id, so that a hidden repository and a missing one look the same).
    ``private``: whether a repository is private (:mod:`.visibility`): only tokens whose private
    prefixes cover it read it; to every other one it is missing. ``gated``: a repository's gate
    ("auto", "manual", "" for none): who may fetch its files (:meth:`may_fetch`). ``deleted``:
    whether a repository was deleted (what serve granted for it ends: :meth:`still_reads`).
    ``accepted``: whether a token name's access request to a gated repository was accepted."""

    def __init__(self, lines: Sequence[str] = (), *, source: TokenFile | None = None,
                 missing: Callable[[str], Exception] = _hidden, private: Callable[[str], bool] = _public,
                 gated: Callable[[str], str] = _ungated, deleted: Callable[[str], bool] = _kept,
                 accepted: Callable[[str, str], bool] = _none_accepted):
        grants = parse_lines(lines)
        self.open = not grants and source is None
        self.missing = missing
        self.private = private
        self.gated = gated
        self.deleted = deleted
        self.accepted = accepted
        self.source = source
        self._session_key = secrets.token_bytes(32)  # a restart signs every page visitor out
        self._watch = threading.Lock()
        # Xet access tokens and xorb URLs: any token's client
        self.xet = Signer([g.token.encode() for g in grants if not g.anonymous], served=_xet_clients(grants))
        # LFS upload URLs: a key of their own, good for write tokens' clients only
        self.uploads = Signer([g.token.encode() for g in grants if not g.anonymous],
                              purpose=b"ocibridge-upload-url", served=[g.token.encode() for g in grants if g.write])
        self.xet.fresh = self.uploads.fresh = self._fresh
        self._named: tuple[object, bytes | None, dict[str, Grant]] = (None, None, {})  # :meth:`granted_to`
        self._lines = self._made(grants)

    def _made(self, grants: Sequence[Grant]) -> _Lines:
        tokens = tuple(g for g in grants if not g.anonymous)
        anonymous = next((g for g in grants if g.anonymous), None)
        return _Lines(tokens, {self._session(g): g for g in tokens}, anonymous=anonymous)

    @property
    def grants(self) -> tuple[Grant, ...]:
        return self._fresh().grants

    def _fresh(self) -> _Lines:
        """The token file's lines, read again when it changed (:class:`.tokenfile.TokenFile`)."""
        if self.source is None or not self.source.due():
            return self._lines
        with self._watch:
            try:
                changed = self.source.changed()
                if changed is None:
                    return self._lines
                grants = parse_lines(changed[1], changed[0], f"--token-file {self.source.path}")
            except UsageError as e:
                if not self._lines.broken:
                    log.error("%s: every token is refused until the file is fixed", e)
                self._lines = _Lines(broken=str(e))
                self.xet.rekey([])
                self.uploads.rekey([])
                return self._lines
            if self._lines.broken:
                log.warning("--token-file %s: read again, %d tokens", self.source.path, len(grants))
            self._lines = self._made(grants)
            tokens = [g.token.encode() for g in grants if not g.anonymous]
            self.xet.rekey(tokens, _xet_clients(grants))
            self.uploads.rekey(tokens, [g.token.encode() for g in grants if g.write])
            return self._lines

    def _known(self, request: Request) -> Grant | None:
        """The grant of the request's bearer token; :class:`Denied` 503 while the file is broken."""
        lines = self._fresh()
        if lines.broken:
            raise Denied(503, "serve cannot read its token file now: no token is taken until it is fixed")
        return find(lines.grants, bearer(request))

    # -- bearer tokens -------------------------------------------------------------------------
    def require(self, request: Request, repo_id: str | None, access: Access) -> Grant | None:
        """The grant of the request's token for ``access`` to ``repo_id`` (None: any repository);
        raises :class:`Denied`, or ``missing(repo_id)`` for a repository it may not read. READ on
        an open server (no token file) is None: anyone reads. Who reads is left in the request
        (:func:`reads`)."""
        if access is Access.WRITE:
            return self._writer(request, repo_id)
        if self.open:
            request.scope[READER] = _everyone
            return None
        given = bearer(request)
        grant = self._known(request)
        if grant is None:
            anonymous = self._lines.anonymous
            if not given and anonymous is not None:  # the anonymous line: public repositories under it
                request.scope[READER] = self.reader(anonymous)
                _READING.set(anonymous)
                if not self.reader(anonymous)(repo_id):
                    raise self.missing(str(repo_id))
                return None
            if not given:
                raise Denied(401, "no token was sent: this server wants 'Authorization: Bearer TOKEN' "
                             "(huggingface_hub: HF_TOKEN or token=)")
            raise Denied(401, "Invalid credentials in Authorization header")
        request.scope[READER] = self.reader(grant)
        request.scope[GRANT] = grant
        _READING.set(grant)
        if not self.reader(grant)(repo_id):
            raise self.missing(str(repo_id))
        return grant

    def reader(self, grant: Grant) -> Callable[[str | None], bool]:
        """Which repositories ``grant`` reads: public ones under its read prefixes, private ones
        under its private prefixes (None: some repository, as a listing asks)."""

        def reads(repo_id: str | None) -> bool:
            if repo_id is None:
                return True
            if grant.may_read_private(repo_id):
                return True
            return grant.may_read(repo_id) and not self.private(repo_id)

        return reads

    def may_fetch(self, request: Request, repo_id: str) -> None:
        """Raise :class:`Denied` (``GatedRepo``) when ``repo_id`` is gated and the request's
        reader, as :meth:`require` or :meth:`page_allowed` found it, is not on its authorized
        list. A gated repository is listed and described to whoever reads it, as on the Hub; its
        files go to the authorized list only: the tokens whose write or private prefixes cover the
        repository (its owners), and those whose access request the owners accepted (accepted at
        once under "auto": :mod:`.repo.accessrequests`); an "auto" gate refuses one who asked nothing.
        Anonymous readers (the anonymous line, or a server without a token file) get none."""
        refused = self._gate_refuses(grant_of(request), repo_id)
        if refused is not None:
            raise refused

    def may_fetch_held(self, request: Request, repo_id: str, why: str | None) -> None:
        """Raise :class:`Denied` (``GatedRepo``) unless the request may write ``repo_id`` (its
        owners) when the revision asked is quarantined (``why``: its finding; None: it is not)."""
        grant = grant_of(request)
        if why is not None and (grant is None or not grant.may_write(repo_id)):
            raise Denied(403, f"{repo_id} is quarantined: {why}; only its owners may read it until a clean "
                         "scan releases it", code="GatedRepo")

    def _gate_refuses(self, grant: Grant | None, repo_id: str) -> Denied | None:
        """Why ``grant`` (None: an anonymous reader) may not fetch the files of ``repo_id``'s gate
        (:meth:`may_fetch`), None when it may or there is no gate."""
        return self._off_the_list(grant, repo_id) if self.gated(repo_id) else None

    def upstream_refuses(self, repo_id: str, *, private: bool, gated: str) -> Denied | None:
        """Why the reader of the request being answered may not have ``repo_id`` were it
        ``private`` or ``gated`` here already: asked by a proxy (upstream/proxy.py) before it
        fetches a repository the upstream keeps so, which it records so here before any of it
        lands. The rules :meth:`reader` and :meth:`may_fetch` apply to such a repository: a private
        one needs a private prefix (else 404: the caller answers it as a repository that is not
        there at all), a gated one its gate's list (else the Hub's GatedRepo 401 or 403). An open
        serve, or a request no reader was decided for, has no one it may go to."""
        grant = None if self.open else _READING.get()
        if private and (grant is None or not grant.may_read_private(repo_id)):
            return Denied(404, f"{repo_id}: no such repository")
        if gated:
            return self._off_the_list(None if grant is None or grant.anonymous else grant, repo_id)
        return None

    def _off_the_list(self, grant: Grant | None, repo_id: str) -> Denied | None:
        """Why ``grant`` (None: an anonymous reader) is not on the list of ``repo_id``'s gate
        (:meth:`may_fetch`), None when it is."""
        what = f"{noun(repo_id)} {hub_id(repo_id)}"
        if grant is None:
            return Denied(401, f"Access to {what} is restricted. You must have access to it and be "
                          "authenticated to access it. Please log in.", code="GatedRepo")
        if grant.may_write(repo_id) or grant.may_read_private(repo_id) or self.accepted(repo_id, grant.name):
            return None
        return Denied(403, f"Access to {what} is restricted and you are not in the authorized list. "
                      f"Ask for access (POST /api/{noun(repo_id)}s/{hub_id(repo_id)}/user-access-request) "
                      "and wait for its owners to accept it", code="GatedRepo")

    def may_take(self, grant: Grant | None, repo_id: str) -> bool:
        """Whether the holder of ``grant`` (None: a request without a token) may have the bytes of
        ``repo_id``'s files: the whole rule a download of them meets (:meth:`require`'s prefixes
        and private scope, then :meth:`may_fetch`'s gate), asked where bytes are reached by their
        content rather than through that repository's name (a commit naming an oid
        serve holds, the LFS batch's "no upload needed"). No: the client is answered as if serve
        held nothing."""
        if grant is None:
            anonymous = self._fresh().anonymous
            reader = _everyone if self.open else None if anonymous is None else self.reader(anonymous)
            return reader is not None and reader(repo_id) and self._gate_refuses(None, repo_id) is None
        return self.reader(grant)(repo_id) and self._gate_refuses(grant, repo_id) is None

    def still_reads(self, client: str, repo_id: str) -> None:
        """Raise unless the client a Xet token or xorb URL names may still fetch ``repo_id``'s
        files, asked at each use and not only when granted: the repository is not deleted, the
        client's token is still served and reads it as it is now (:meth:`reader`: a private
        repository needs a private prefix) and is on its gate's list (:meth:`may_fetch`): the rule
        :meth:`may_take` asks, for the client a grant names. The record is :mod:`ocibridge.hubserver.repo.repostates`',
        read again every few seconds on every replica, so a change of access ends what was
        granted within that bound, not the grant's hour."""
        if self.deleted(repo_id):
            raise self.missing(repo_id)
        grant = None
        if not self.open:
            grant = self.granted_to(client)
            if grant is None:
                raise Denied(401, "the token this was granted to is no longer served: ask for a new Xet token")
            if not self.reader(grant)(repo_id):
                raise self.missing(repo_id)
        refused = self._gate_refuses(None if grant is None or grant.anonymous else grant, repo_id)
        if refused is not None:
            raise refused

    def granted_to(self, client: str) -> Grant | None:
        """The grant (the anonymous line's for requests without a token) whose token the client
        name of a Xet grant is (:meth:`.Signer.client_of`), None for no served token; the names
        are made once per token file and key, not per request."""
        lines = self._fresh()
        seen, key, named = self._named
        if seen is not lines or key != self.xet.key:
            every = (*lines.grants, *((lines.anonymous,) if lines.anonymous is not None else ()))
            named = {name: g for g in every for name in self.xet.names_of(g.token)}
            self._named = (lines, self.xet.key, named)
        return named.get(client)

    def _writer(self, request: Request, repo_id: str | None) -> Grant:
        given = bearer(request)
        grant = None if self.open else self._known(request)
        if grant is None:
            if not any(g.write for g in self._lines.grants):
                raise Denied(401, "writes need a write token: serve's --token-file holds none "
                             "(a line 'TOKEN write [REPO-PREFIX]', docs/serve.md)")
            raise Denied(401, "no token was sent: writes need 'Authorization: Bearer TOKEN'" if not given
                         else "Invalid credentials in Authorization header")
        request.scope[GRANT] = grant
        if not grant.write:
            raise Denied(403, "You don't have the rights to write here: this token reads only")
        if repo_id is not None and not grant.may_write(repo_id):
            raise Denied(403, f"You don't have the rights to write to {repo_id}: this token ({grant.name}) "
                         f"writes {writes_of(grant)}")
        return grant

    def who(self, request: Request) -> Grant:
        """The grant of the request's token, whatever it may do (``whoami``); raises :class:`Denied`."""
        grant = None if self.open else self._known(request)
        if grant is None:
            raise Denied(401, "Invalid user token." if bearer(request) else "no token was sent")
        return grant

    # -- the pages' cookie ---------------------------------------------------------------------
    @property
    def pages_need_login(self) -> bool:
        return not self.open

    def _session(self, grant: Grant) -> str:
        return hmac.new(self._session_key, grant.line, hashlib.sha256).hexdigest()

    def page_allowed(self, request: Request, repo_id: str | None = None) -> bool:
        """The request's cookie is a session of a served token (no token file: pages are open; no
        cookie: the anonymous line's public repositories, when there is one); raises
        ``missing(repo_id)`` when that token may not read ``repo_id`` (None: any page).
        Who reads is left in the request (:func:`reads`)."""
        if self.open:
            request.scope[READER] = _everyone
            return True
        given = request.cookies.get(COOKIE, "")
        lines = self._fresh()
        found = [g for s, g in lines.sessions.items() if hmac.compare_digest(given, s)]
        if not found:
            if lines.anonymous is None or not self.reader(lines.anonymous)(repo_id):
                return False  # the login form: a signed-in visitor may read it
            request.scope[READER] = self.reader(lines.anonymous)  # the anonymous line's public pages
            _READING.set(lines.anonymous)
            return True
        request.scope[READER] = self.reader(found[0])
        request.scope[GRANT] = found[0]  # (the page's signed-in token: :meth:`may_fetch`)
        _READING.set(found[0])
        if not self.reader(found[0])(repo_id):
            raise self.missing(str(repo_id))
        return True

    def session_for(self, token: str) -> str | None:
        """The cookie's value for ``token``, None when no such token is served."""
        grant = None if self.open else find(self._fresh().grants, token)
        return None if grant is None else self._session(grant)


def _everyone(repo_id: str | None) -> bool:
    return True


def _nobody(repo_id: str | None) -> bool:
    return False


def reads(request: Request) -> Callable[[str | None], bool]:
    """Which repositories the request's reader may read, as :meth:`Gate.require` or
    :meth:`Gate.page_allowed` left it: a listing shows those only (none when neither ran)."""
    found = request.scope.get(READER)
    return found if callable(found) else _nobody


def grant_of(request: Request) -> Grant | None:
    """The grant of the request's bearer token as :meth:`Gate.require` found it (the audit's
    token name, for refused requests too), or of a page's signed-in visitor
    (:meth:`Gate.page_allowed`); None when it found none."""
    found = request.scope.get(GRANT)
    return found if isinstance(found, Grant) else None
