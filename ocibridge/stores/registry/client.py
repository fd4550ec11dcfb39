"""The HTTP transport to one registry host: auth, retries with backoff, redirects, errors.

One shared ``httpx.Client`` per host (thread-safe, sized pool). Redirects are followed here,
not by httpx, so the Authorization header is only ever sent to the registry's own origin:
blob GETs often redirect to a storage backend on another host, which must not see it.
"""

from __future__ import annotations

import dataclasses
import email.utils
import json
import random
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from ... import interrupt
from ...errors import RegistryError
from ...httpheaders import header_int
from .auth import Authenticator
from .bodies import read_bounded, read_prefix
from .credentials import Credentials, get_credentials
from .hosts import host_settings
from .ratelimit import RateLimit
from .tracked import tracked_transport
from .trust import host_cert_files, ssl_context
from .unreachable import classify

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5
_DEFAULT_CODES = {
    401: ("UNAUTHORIZED", "authentication required"),
    403: ("DENIED", "requested access to the resource is denied"),
}


@dataclass(frozen=True)
class ClientOptions:
    """How to reach a registry; the defaults are what a careful client should do."""

    plain_http: bool = False
    insecure: bool = False
    ca_file: str | None = None
    username: str | None = None
    password: str | None = None
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    max_retries: int = 5
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    retry_after_cap: float = 60.0
    pool_size: int = 16
    docker_config: str | None = None
    authfile: str | None = None
    tls: bool | None = None  # True: HTTPS even on loopback (settings file: plain_http = false)
    limit_rate: int | None = None  # bytes per second over all transfers (--limit-rate)


def is_loopback(host: str) -> bool:
    """Whether ``host[:port]`` names this machine (plain HTTP by Docker's convention)."""
    name = host.rsplit(":", 1)[0] if not host.endswith("]") and host.count(":") == 1 else host
    if name.startswith("[") and "]" in name:
        name = name[1 : name.index("]")]
    return name in LOOPBACK_HOSTS or name.startswith("127.")


def base_url(host: str, options: ClientOptions) -> str:
    """``http://`` with plain_http, and for loopback unless a CA file or ``insecure`` asks for
    TLS; ``https://`` everywhere else."""
    api_host = DOCKER_HUB_API if host == DOCKER_HUB else host
    if options.plain_http:
        return f"http://{api_host}"
    if is_loopback(host) and not (options.tls or options.ca_file or options.insecure
                                  or host_cert_files(host) != ([], [])):
        return f"http://{api_host}"
    return f"https://{api_host}"


def with_host_settings(host: str, options: ClientOptions) -> ClientOptions:
    """``options`` completed by the settings file (hosts.py): flags given here win."""
    saved = host_settings(host)
    return dataclasses.replace(
        options,
        ca_file=options.ca_file or saved.ca_file,
        insecure=options.insecure or bool(saved.insecure),
        plain_http=options.plain_http or bool(saved.plain_http),
        tls=options.tls if options.tls is not None else (True if saved.plain_http is False else None),
    )


VerifyFactory = Callable[[], "ssl.SSLContext | bool"]


def _verify(host: str, options: ClientOptions) -> VerifyFactory:
    """How to verify ``host``'s certificate, built when first needed (see trust.py)."""
    if options.insecure:
        return lambda: False
    return lambda: ssl_context(host, options.ca_file)


@dataclass
class TransferStats:
    """Counters a store exposes so tests and summaries can see what went over the wire."""

    requests: int = 0
    retries: int = 0
    bytes_uploaded: int = 0
    bytes_downloaded: int = 0
    blobs_uploaded: int = 0
    blobs_mounted: int = 0
    blobs_skipped: int = 0
    download_resumes: int = 0
    upload_resumes: int = 0
    upload_restarts: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, int]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}


class _Transport(httpx.BaseTransport):
    """Plain HTTP through a transport without certificates; the verifying TLS transport is
    built on the first https request. Building it parses the CA bundle (~25 ms at every
    start), which a plain-HTTP (loopback) registry never needs unless it redirects to https."""

    def __init__(self, verify: VerifyFactory, limits: httpx.Limits):
        self._verify = verify
        self._limits = limits
        self._plain = tracked_transport(verify=False, limits=limits)
        self._tls: httpx.HTTPTransport | None = None
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme == "http":
            return self._plain.handle_request(request)
        with self._lock:
            if self._tls is None:
                self._tls = tracked_transport(verify=self._verify(), limits=self._limits)
        return self._tls.handle_request(request)

    def close(self) -> None:
        self._plain.close()
        if self._tls is not None:
            self._tls.close()


class TransportFailure(RegistryError):
    """The connection failed (refused, reset, timed out) rather than the registry answering."""


class RegistryClient:
    """Requests to one registry host, authenticated per scope, retried, never leaking auth."""

    def __init__(self, host: str, options: ClientOptions | None = None):
        self.host = host
        self.options = with_host_settings(host, options or ClientOptions())
        self.base = base_url(host, self.options)
        self.stats = TransferStats()
        o = self.options
        self.rate_limit = RateLimit(o.limit_rate) if o.limit_rate else None
        limits = httpx.Limits(max_connections=o.pool_size, max_keepalive_connections=o.pool_size)
        transport: dict[str, Any]
        if urllib.request.getproxies():  # httpx honours proxy variables only on its own transport
            transport = {"verify": _verify(host, o)(), "limits": limits}
        else:
            transport = {"transport": _Transport(_verify(host, o), limits)}
        self.http = httpx.Client(
            timeout=httpx.Timeout(o.read_timeout, connect=o.connect_timeout),
            follow_redirects=False,
            **transport,
        )
        creds = (
            Credentials(o.username, o.password or "")
            if o.username
            else get_credentials(host, o.docker_config, o.authfile)
        )
        self.auth = Authenticator(host, self.http, creds)

    def close(self) -> None:
        self.http.close()

    def url(self, path: str) -> str:
        return path if "://" in path else self.base + path

    def same_origin(self, url: str) -> bool:
        a, b = urlsplit(url), urlsplit(self.base)
        return (a.scheme, a.netloc) == (b.scheme, b.netloc)

    # -- one request -----------------------------------------------------------------------
    def send(
        self,
        method: str,
        path: str,
        *,
        scopes: Iterable[str] = (),
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        content: bytes | Iterable[bytes] | None = None,
        stream: bool = False,
        retry: bool | None = None,
    ) -> httpx.Response:
        """Send with auth, redirects and (for replayable requests) bounded retries.

        A streamed body (an iterator) cannot be replayed, so it is sent once; its caller owns
        recovery (the upload resumes or restarts). Returns the response of whatever status;
        with ``stream=True`` the caller must close it.
        """
        scopes = tuple(scopes)
        replayable = content is None or isinstance(content, bytes)
        retry = replayable if retry is None else retry
        attempt = 0
        auth_retried = False
        while True:
            interrupt.check()
            try:
                response = self._send_following(method, self.url(path), scopes, headers,
                                                params, content, stream)
            except httpx.TransportError as e:
                interrupt.check()  # the interrupt shut the socket down: no retry
                if self._fall_back_to_http(path, e):
                    continue
                fatal = classify(self.host, self.url(path), e)
                if fatal is not None:  # refused, unresolvable, untrusted: a retry cannot help
                    raise fatal from None
                if not retry or attempt >= self.options.max_retries:
                    raise TransportFailure(
                        f"registry {self.host}: {method} {_path_of(path)} failed: {_one_line(e)}"
                    ) from e
                self._sleep(attempt, None)
                attempt += 1
                continue
            if response.status_code == 401 and not auth_retried:
                challenge = response.headers.get("www-authenticate", "")
                sent = response.request.headers.get("authorization")
                _discard(response)
                if challenge and self.auth.on_challenge(challenge, scopes, sent) and replayable:
                    auth_retried = True
                    continue
                return response
            if response.status_code in RETRY_STATUSES and retry and attempt < self.options.max_retries:
                wait = retry_after_seconds(response.headers.get("retry-after"))
                _discard(response)
                self._sleep(attempt, wait)
                attempt += 1
                continue
            return response

    def _fall_back_to_http(self, path: str, error: httpx.TransportError) -> bool:
        """With ``insecure``, a registry that answers TLS with plain HTTP is spoken to in plain
        HTTP from then on: Docker's rule for insecure registries (HTTPS first, then HTTP), so
        ``--insecure`` works for a TLS registry and a plain one alike. Once, for the base URL."""
        if not self.options.insecure or not self.base.startswith("https://") or "://" in path:
            return False
        cause: BaseException | None = error
        while cause is not None and not isinstance(cause, ssl.SSLError):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            return False
        self.base = "http://" + self.base[len("https://"):]
        return True

    def _send_following(self, method, url, scopes, headers, params, content, stream):
        for _ in range(MAX_REDIRECTS + 1):
            request_headers = dict(headers or {})
            if self.same_origin(url):
                authorization = self.auth.authorization(scopes)
                if authorization:
                    request_headers["Authorization"] = authorization
            request = self.http.build_request(method, url, headers=request_headers,
                                              params=params, content=content)
            self.stats.add(requests=1)
            response = self.http.send(request, stream=True)
            if response.status_code not in REDIRECT_STATUSES or method not in ("GET", "HEAD"):
                if not stream:
                    read_bounded(response, f"registry {self.host}: {method} {request.url.path}")
                return response
            location = response.headers.get("location")
            _discard(response)
            if not location:
                raise RegistryError(f"registry {self.host}: redirect without a Location", 502)
            url = urljoin(str(response.url), location)
            params = None  # the Location carries its own query
        raise RegistryError(f"registry {self.host}: too many redirects for {method} {url}")

    def _sleep(self, attempt: int, retry_after: float | None) -> None:
        """Full-jitter exponential backoff, or exactly what Retry-After asks (capped)."""
        self.stats.add(retries=1)
        if retry_after is not None:
            delay = min(retry_after, self.options.retry_after_cap)
        else:
            delay = random.uniform(0, min(self.options.backoff_cap,
                                          self.options.backoff_base * 2**attempt))
        interrupt.sleep(delay)

    # -- errors ------------------------------------------------------------------------------
    def error(self, response: httpx.Response, action: str) -> RegistryError:
        """A RegistryError carrying the registry's OCI error code, as one line."""
        code, message = parse_error_body(response)
        if code is None and response.status_code in _DEFAULT_CODES:  # HEAD answers have no body
            code, message = _DEFAULT_CODES[response.status_code]
        text = f"registry {self.host} {action}: "
        text += f"{code}: {message}" if code else f"HTTP {response.status_code}"
        if not code and message:
            text += f": {message}"
        sent = response.request.headers.get("authorization") is not None
        return RegistryError(_one_line_str(text), response.status_code, code, credentials_sent=sent)


def parse_error_body(response: httpx.Response) -> tuple[str | None, str]:
    """The first OCI error ``(code, message)`` of a response body, if it has one."""
    try:
        body = response.content[:65536]
    except httpx.ResponseNotRead:
        return None, ""
    try:
        errors = json.loads(body).get("errors") or []
        first = errors[0]
        return str(first.get("code") or "") or None, str(first.get("message") or "")
    except (ValueError, AttributeError, IndexError, TypeError):
        text = body.decode("utf-8", "replace").strip()
        return None, text[:200]


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds or an HTTP date; None when absent or unparseable."""
    if not value:
        return None
    value = value.strip()
    seconds = header_int(value)
    if seconds is not None:
        return float(seconds)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _discard(response: httpx.Response) -> None:
    """Drop an answer we do not use, reading no more than a bounded prefix of it."""
    if response.is_closed:
        return
    read_prefix(response)


def _path_of(path: str) -> str:
    return urlsplit(path).path if "://" in path else path.split("?", 1)[0]


def _one_line(e: BaseException) -> str:
    return _one_line_str(str(e) or type(e).__name__)


def _one_line_str(text: str) -> str:
    return " ".join(text.split())
