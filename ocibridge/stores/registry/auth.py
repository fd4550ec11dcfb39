"""The auth layer: WWW-Authenticate challenges, Basic, and Bearer tokens per scope.

Distribution's token auth grants a token per set of scopes (``repository:team/x:pull`` is not
``repository:team/x:pull,push``), so tokens are cached by scope set and renewed when they
expire or when the registry answers 401 with a fresh challenge. Without credentials the token
server is asked anonymously, which public repositories allow. Credentials come from the
credential function the client was given; this module never looks in a credential store.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import httpx

from ocibridge.core import boundedjson
from ocibridge.core.hosts import is_loopback
from ocibridge.errors import RegistryError
from ocibridge.stores.registry import errcodes
from ocibridge.stores.registry.bodies import read_bounded
from ocibridge.stores.registry.options import Credentials
from ocibridge.stores.registry.transport import Layer, Origin, discard, policy_of

#: Tokens are renewed this many seconds before the server says they expire.
EXPIRY_MARGIN = 5.0
#: The token spec's default lifetime when the server gives none.
DEFAULT_EXPIRES_IN = 60.0
#: A token refused this long after it was issued, while it claimed to live longer, shows the
#: registry's real lifetime (younger refusals are about scope, not age).
MIN_OBSERVED_LIFE = 2.0
CLIENT_ID = "ocibridge"

log = logging.getLogger("ocibridge.http")

_PARAM_RE = re.compile(r'\s*([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))\s*,?')


@dataclass(frozen=True)
class Challenge:
    scheme: str  # lower case: "basic" or "bearer"
    params: dict[str, str]


def parse_challenge(header: str) -> Challenge | None:
    """Parse one ``WWW-Authenticate`` value: ``Bearer realm="…",service="…",scope="…"``."""
    header = header.strip()
    if not header:
        return None
    scheme, _, rest = header.partition(" ")
    params: dict[str, str] = {}
    pos = 0
    while pos < len(rest):
        m = _PARAM_RE.match(rest, pos)
        if not m or m.end() == pos:
            break
        value = m.group(2) if m.group(2) is not None else m.group(3)
        params[m.group(1).lower()] = re.sub(r"\\(.)", r"\1", value)
        pos = m.end()
    return Challenge(scheme.lower(), params)


def scope_key(scopes: Iterable[str]) -> str:
    return " ".join(sorted(set(scopes)))


@dataclass
class Token:
    value: str
    expires_at: float
    issued_at: float = 0.0

    def valid(self) -> bool:
        return time.monotonic() < self.expires_at


#: ``httpx.Client.build_request``: the client's default headers and timeouts on a new request.
RequestBuilder = Callable[..., httpx.Request]


class Authenticator:
    """Chooses the Authorization header for a request's scopes; thread-safe."""

    def __init__(self, host: str, build: RequestBuilder, token_transport: httpx.BaseTransport,
                 credentials: Credentials | None, *, registry_url: Callable[[], str],
                 plain_allowed: Callable[[str], bool] = lambda host: False):
        self.host = host
        #: the registry's base URL now (its scheme is the channel the user chose)
        self._registry_url = registry_url
        #: whether the user marked a ``host[:port]`` plain HTTP or insecure
        self._plain_allowed = plain_allowed
        self._build = build
        self._token_transport = token_transport
        self.credentials = credentials
        self._lock = threading.Lock()
        self._fetch_lock = threading.Lock()
        self._scheme: str | None = None
        self._bearer: dict[str, str] = {}
        self._tokens: dict[str, Token] = {}
        self.token_requests = 0
        #: seconds tokens were seen to live, when less than they claimed (renewed before that)
        self.observed_life: float | None = None

    def authorization(self, scopes: Iterable[str]) -> str | None:
        """The header for these scopes, fetching a token first when the registry wants one."""
        scopes = tuple(scopes)
        with self._lock:
            scheme = self._scheme
            token = self._tokens.get(scope_key(scopes))
        if scheme == "basic":
            return self._basic()
        if scheme != "bearer":
            return None
        if token is None or not token.valid():
            token = self._fetch_token(scopes)
        return f"Bearer {token.value}"

    def on_challenge(self, header: str, scopes: Iterable[str], sent: str | None = None) -> bool:
        """Learn from a 401; True when a retry with new authorization is worth making.

        ``sent`` is the Authorization the refused request carried. The answer depends on it, not
        on what other threads learnt meanwhile: requests sent together before the first 401 all
        come back 401, and each must retry once with the credentials (or the token) that are
        current now. Only a request that already carried them is refused for good.
        """
        scopes = tuple(scopes)
        challenge = parse_challenge(header)
        if challenge is None:
            return False
        if challenge.scheme == "basic":
            with self._lock:
                self._scheme = "basic"
            basic = self._basic()
            return basic is not None and sent != basic
        if challenge.scheme != "bearer" or "realm" not in challenge.params:
            return False
        key = scope_key(scopes)
        with self._lock:
            self._scheme = "bearer"
            self._bearer = dict(challenge.params)
            current = self._tokens.get(key)
            if current is not None and current.valid() and sent != f"Bearer {current.value}":
                return True  # another request renewed the token after this one was sent
            if current is not None and current.valid():
                self._died_early(current)
            self._tokens.pop(key, None)
        extra = challenge.params.get("scope", "")
        self._fetch_token(scopes, extra.split() if extra else ())
        return True

    def _died_early(self, token: Token) -> None:
        """A token refused before its announced expiry (Docker Hub, GHCR: ~300 s, and some
        die sooner than they say): later tokens are renewed before the age it reached, so a
        long transfer does not send a whole chunk with a dead token each time. Lock held."""
        age = time.monotonic() - token.issued_at
        if age < MIN_OBSERVED_LIFE or (self.observed_life is not None and age >= self.observed_life):
            return
        self.observed_life = age
        log.info("%s: a bearer token was refused after %.1f s, before its announced expiry: "
                 "tokens are renewed after %.1f s from now on", self.host, age, 0.8 * age)

    def _basic(self) -> str | None:
        c = self.credentials
        if c is None or not c.username:
            return None
        raw = f"{c.username}:{c.password}".encode()
        return "Basic " + base64.b64encode(raw).decode()

    def _fetch_token(self, scopes: tuple[str, ...], extra: Iterable[str] = ()) -> Token:
        """Ask the token server for the scopes; one fetch at a time, re-checking the cache."""
        key = scope_key(scopes)
        with self._fetch_lock:
            with self._lock:
                cached = self._tokens.get(key)
                bearer = dict(self._bearer)
            if cached is not None and cached.valid():
                return cached
            wanted = sorted(set(scopes) | set(extra))
            token = self._request_token(bearer, wanted)
            with self._lock:
                self._tokens[key] = token
            return token

    def _request_token(self, bearer: dict[str, str], scopes: list[str]) -> Token:
        realm = _checked_realm(self.host, bearer.get("realm", ""))
        service = bearer.get("service")
        c = self.credentials
        if c is not None and (c.identity_token or c.username):
            self._check_channel(realm)
        self.token_requests += 1
        try:
            if c is not None and c.identity_token:
                form = {"grant_type": "refresh_token", "refresh_token": c.identity_token,
                        "client_id": CLIENT_ID, "scope": " ".join(scopes)}
                if service:
                    form["service"] = service
                request = self._build("POST", realm, data=form)
            else:
                params = httpx.QueryParams({"service": service, "scope": scopes} if service else {"scope": scopes})
                headers = {}
                basic = self._basic()
                if basic:
                    headers["Authorization"] = basic
                request = self._build("GET", realm, params=params, headers=headers)
            response = self._token_transport.handle_request(request)
            read_bounded(response, f"registry {self.host}: token server {realm}")
        except httpx.TransportError as e:
            raise RegistryError(f"registry {self.host}: token server {realm} failed: {e}") from e
        if response.status_code != 200:
            who = "refused the credentials" if response.status_code in (401, 403) else "failed"
            raise RegistryError(
                f"registry {self.host}: token server {realm} {who} "
                f"(HTTP {response.status_code}) for scope {' '.join(scopes) or '(none)'}",
                response.status_code,
                errcodes.UNAUTHORIZED if response.status_code == 401 else None,
            )
        try:
            body = boundedjson.loads(response.content)
            value = body.get("token") or body.get("access_token")
            expires_in = float(body.get("expires_in") or DEFAULT_EXPIRES_IN)
        except (ValueError, AttributeError, TypeError):
            value, expires_in = None, 0.0
        if not value:
            raise RegistryError(f"registry {self.host}: token server {realm} returned no token")
        lifetime = max(1.0, expires_in - EXPIRY_MARGIN) if expires_in > 2 * EXPIRY_MARGIN \
            else expires_in * 0.8
        with self._lock:
            if self.observed_life is not None:
                lifetime = min(lifetime, 0.8 * self.observed_life)
        now = time.monotonic()
        return Token(str(value), now + lifetime, now)


    def _check_channel(self, realm: str) -> None:
        """Refuse to send credentials to a plain-HTTP realm the user did not choose.

        The challenge comes from the registry: a cleartext realm would hand the password to
        anyone on the path. Allowed when the user marked the realm's host plain HTTP or
        insecure, or when a plain-HTTP loopback registry names a loopback realm (neither
        leaves this machine); an HTTPS registry's realm never gets the weaker channel by
        default, even on loopback (docs/security.md, invariant)."""
        url = httpx.URL(realm)
        if url.scheme != "http":
            return
        where = f"{url.host}:{url.port}" if url.port else url.host
        if self._plain_allowed(where):
            return
        if not self._registry_url().startswith("https://") and is_loopback(self.host) and is_loopback(where):
            return
        shown = realm if len(realm) <= 200 else realm[:200] + "..."
        why = "while the registry uses HTTPS" if self._registry_url().startswith("https://") else "off this machine"
        raise RegistryError(f"registry {self.host}: its token server realm {shown!r} is plain HTTP {why}; "
                            "credentials are not sent in cleartext (if that server is "
                            f"meant to be plain HTTP, mark {where} plain_http in the registry settings)")


class AuthTransport(Layer):
    """Puts the Authorization header on requests to the registry's own origin (never on
    another host's) and answers a 401 challenge once: learn it, then resend if the body can be
    sent again."""

    def __init__(self, inner: httpx.BaseTransport, auth: Authenticator, origin: Origin):
        super().__init__(inner)
        self.auth = auth
        self.origin = origin

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not self.origin.same(request.url):
            return self.inner.handle_request(request)
        policy = policy_of(request)
        self._authorize(request, policy.scopes)
        response = self.inner.handle_request(request)
        if response.status_code != 401:
            return response
        challenge = response.headers.get("www-authenticate", "")
        sent = request.headers.get("authorization")
        discard(response)
        if challenge and self.auth.on_challenge(challenge, policy.scopes, sent) and policy.replayable:
            self._authorize(request, policy.scopes)
            return self.inner.handle_request(request)
        return response

    def _authorize(self, request: httpx.Request, scopes: tuple[str, ...]) -> None:
        authorization = self.auth.authorization(scopes)
        if authorization:
            request.headers["Authorization"] = authorization
        else:
            request.headers.pop("Authorization", None)


def _checked_realm(host: str, realm: str) -> str:
    """The token server URL a challenge names, refused unless it is a plain http(s) URL: a
    realm that does not parse must be one error line, not an exception from deep in httpx."""
    try:
        url = httpx.URL(realm)
    except (httpx.InvalidURL, TypeError, ValueError):
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        shown = realm if len(realm) <= 200 else realm[:200] + "..."
        raise RegistryError(f"registry {host}: its token server realm {shown!r} is not an http(s) URL")
    return realm
