"""A small Docker-registry token server (the `auth: token` realm) for tests.

It checks Basic credentials, grants per repository only the actions a user's policy allows,
and signs ES256 JWTs whose header carries the signing cert (`x5c`) and libtrust `kid`, which
is what distribution 2.8 verifies against its `rootcertbundle`. Every request is recorded so
tests can assert which scopes a client asked for and how often it renewed its tokens.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import json
import math
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from .certs import SigningKey

ALL_ACTIONS = frozenset({"pull", "push", "delete", "*"})
# distribution 2.8 accepts a JWT until `exp` + 60 s (clock-skew leeway); see TokenServer.enforce_expiry
REGISTRY_LEEWAY = 60


@dataclass
class User:
    """A user and what they may do: (repository glob, allowed actions) rules, first match wins."""

    password: str
    rules: list[tuple[str, frozenset[str]]] = field(default_factory=list)
    catalog: bool = False

    def allowed(self, repository: str) -> frozenset[str]:
        for pattern, actions in self.rules:
            if fnmatch.fnmatchcase(repository, pattern):
                return actions
        return frozenset()


@dataclass(frozen=True)
class Scope:
    """One parsed `type:name:actions` scope."""

    type: str
    name: str
    actions: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Scope:
        kind, _, rest = text.partition(":")
        name, _, actions = rest.rpartition(":")
        return cls(kind, name, tuple(a for a in actions.split(",") if a))

    def __str__(self) -> str:
        return f"{self.type}:{self.name}:{','.join(self.actions)}"


@dataclass(frozen=True)
class TokenRequest:
    """What the token server saw and answered, for assertions."""

    method: str
    account: str | None  # authenticated user name, None for anonymous
    service: str | None
    scopes: tuple[str, ...]  # as asked
    granted: tuple[str, ...]  # as granted, same format
    status: int
    time: float


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenServer:
    """Threaded loopback token server; `realm` is the URL to put in the registry config."""

    def __init__(
        self,
        signing_key: SigningKey,
        users: dict[str, User],
        *,
        service: str = "ocibridge-test-registry",
        issuer: str = "ocibridge-test-token-server",
        expires_in: int = 300,
        anonymous: User | None = None,
        enforce_expiry: bool = True,
    ) -> None:
        self.signing_key = signing_key
        self.users = users
        self.service = service
        self.issuer = issuer
        self.expires_in = expires_in  # may be changed between tests
        # Backdate `exp` by the registry's leeway so the registry really refuses a token once
        # `expires_in` has passed: a client that ignores expiry then sees 401 invalid_token.
        self.enforce_expiry = enforce_expiry
        self.anonymous = anonymous or User(password="", rules=[])
        self._lock = threading.Lock()
        self._requests: list[TokenRequest] = []
        self._refresh_tokens: dict[str, str] = {}
        server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self.realm = f"http://127.0.0.1:{self.port}/token"
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    # -- recording -------------------------------------------------------------------------
    @property
    def requests(self) -> list[TokenRequest]:
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()

    def scopes_requested(self) -> list[str]:
        """Every scope asked for, in order, across all recorded requests."""
        return [s for r in self.requests for s in r.scopes]

    def _record(self, req: TokenRequest) -> None:
        with self._lock:
            self._requests.append(req)

    # -- granting --------------------------------------------------------------------------
    def authenticate(self, username: str, password: str) -> bool:
        user = self.users.get(username)
        return user is not None and user.password == password

    def grant(self, account: str | None, scopes: Iterable[str]) -> list[Scope]:
        """Intersect what was asked with what the account may do; drop scopes left empty."""
        user = self.users[account] if account else self.anonymous
        granted: list[Scope] = []
        for text in scopes:
            scope = Scope.parse(text)
            if scope.type == "repository":
                allowed = user.allowed(scope.name)
                if "*" in allowed:
                    allowed = ALL_ACTIONS
                actions = tuple(a for a in scope.actions if a in allowed)
            elif scope.type == "registry" and scope.name == "catalog" and user.catalog:
                actions = scope.actions
            else:
                actions = ()
            if actions:
                granted.append(Scope(scope.type, scope.name, actions))
        return granted

    def issue(self, account: str | None, granted: list[Scope]) -> dict[str, object]:
        """Sign a JWT for `granted` and return the token endpoint's JSON answer."""
        clock = time.time()
        now = int(clock)
        expires_in = int(self.expires_in)
        expires_at = math.ceil(clock + expires_in)  # valid for at least expires_in seconds
        exp = expires_at - REGISTRY_LEEWAY if self.enforce_expiry else expires_at
        header = {
            "typ": "JWT",
            "alg": "ES256",
            "kid": self.signing_key.libtrust_kid,
            "x5c": [self.signing_key.cert_der_b64],
        }
        claims = {
            "iss": self.issuer,
            "sub": account or "",
            "aud": self.service,
            "exp": exp,
            "nbf": now - 1,
            "iat": now,
            "jti": uuid.uuid4().hex,
            "access": [
                {"type": s.type, "name": s.name, "actions": list(s.actions)} for s in granted
            ],
        }
        signing_input = (
            _b64url(json.dumps(header, separators=(",", ":")).encode())
            + "."
            + _b64url(json.dumps(claims, separators=(",", ":")).encode())
        )
        der = self.signing_key.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        token = signing_input + "." + _b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))
        answer: dict[str, object] = {
            "token": token,
            "access_token": token,
            "expires_in": expires_in,
            "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        }
        return answer

    def new_refresh_token(self, account: str) -> str:
        token = uuid.uuid4().hex
        with self._lock:
            self._refresh_tokens[token] = account
        return token

    def account_for_refresh_token(self, token: str) -> str | None:
        with self._lock:
            return self._refresh_tokens.get(token)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _make_handler(ts: TokenServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def _reply(self, status: int, body: dict[str, object], extra: dict[str, str] | None = None):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _basic(self) -> tuple[str, str] | None | bool:
            """(user, password), None when absent, False when malformed."""
            header = self.headers.get("Authorization")
            if not header:
                return None
            kind, _, value = header.partition(" ")
            if kind.lower() != "basic":
                return False
            try:
                user, sep, password = base64.b64decode(value, validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return False
            return (user, password) if sep else False

        def _finish(self, method: str, account: str | None, service: str | None,
                    scopes: list[str], refresh: bool) -> None:
            granted = ts.grant(account, scopes)
            answer = ts.issue(account, granted)
            if refresh and account:
                answer["refresh_token"] = ts.new_refresh_token(account)
            ts._record(TokenRequest(method, account, service, tuple(scopes),
                                    tuple(str(g) for g in granted), 200, time.time()))
            self._reply(200, answer)

        def _deny(self, method: str, service: str | None, scopes: list[str]) -> None:
            ts._record(TokenRequest(method, None, service, tuple(scopes), (), 401, time.time()))
            self._reply(
                HTTPStatus.UNAUTHORIZED,
                {"errors": [{"code": "UNAUTHORIZED", "message": "bad credentials"}]},
                {"WWW-Authenticate": 'Basic realm="ocibridge-test-token-server"'},
            )

        def do_GET(self) -> None:  # noqa: N802
            parts = urlsplit(self.path)
            if parts.path != "/token":
                self._reply(404, {"error": "not found"})
                return
            query = parse_qs(parts.query)
            scopes = [s for value in query.get("scope", []) for s in value.split(" ") if s]
            service = (query.get("service") or [None])[0]
            creds = self._basic()
            if creds is False or (creds and not ts.authenticate(*creds)):
                self._deny("GET", service, scopes)
                return
            account = creds[0] if creds else None
            offline = (query.get("offline_token") or ["false"])[0] == "true"
            self._finish("GET", account, service, scopes, offline)

        def do_POST(self) -> None:  # noqa: N802
            """OAuth2 form: grant_type=password or refresh_token (what docker/oras-go may use)."""
            length = int(self.headers.get("Content-Length") or 0)
            form = parse_qs(self.rfile.read(length).decode())
            field_ = {k: v[0] for k, v in form.items()}
            scopes = [s for s in field_.get("scope", "").split(" ") if s]
            service = field_.get("service")
            grant = field_.get("grant_type")
            account: str | None = None
            if grant == "password":
                user, password = field_.get("username", ""), field_.get("password", "")
                if ts.authenticate(user, password):
                    account = user
            elif grant == "refresh_token":
                account = ts.account_for_refresh_token(field_.get("refresh_token", ""))
            if account is None:
                self._deny("POST", service, scopes)
                return
            self._finish("POST", account, service, scopes, True)

    return Handler
