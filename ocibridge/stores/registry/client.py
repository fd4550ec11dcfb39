"""The client of one registry host: builds requests and sends them down the transport stack.

The stack (transport.py) does the work, one concern per layer: retries with backoff, the
HTTPS->HTTP fallback, redirects, auth, request counting, the mirror's request gate, the
request log and the ``--limit-rate`` byte budget. This module chooses the base URL, assembles the stack from
:class:`RegistryOptions`, and turns a registry's error answer into one line. Credentials come
from the credential function it is given: it never reads a credential store itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

import httpx

from ocibridge.core.environment import USER_AGENT as ENV_USER_AGENT
from ocibridge.core.hosts import OddHost, canonical_host, is_loopback
from ocibridge.errors import InvalidReference, RegistryError
from ocibridge.stores.registry.auth import Authenticator, AuthTransport
from ocibridge.stores.registry.bodies import read_bounded
from ocibridge.stores.registry.errcodes import code_of, parse_error_body
from ocibridge.stores.registry.fallback import FallbackTransport
from ocibridge.stores.registry.hostsettings import host_settings
from ocibridge.stores.registry.options import ByteBudget, CredentialFunc, RegistryOptions, anonymous
from ocibridge.stores.registry.quickhead import DOCKER_HUB, user_agent
from ocibridge.stores.registry.ratelimit import RateLimitTransport, budget_for
from ocibridge.stores.registry.redirects import MAX_REDIRECTS, REDIRECT_STATUSES, RedirectTransport
from ocibridge.stores.registry.retry import (
    RETRY_STATUSES,
    Backoff,
    RetryTransport,
    TransportFailure,
    retry_after_seconds,
)
from ocibridge.stores.registry.stats import TransferStats
from ocibridge.stores.registry.tracked import NetworkTransport, VerifyFactory
from ocibridge.stores.registry.transport import (
    CountingTransport,
    GateTransport,
    LoggingTransport,
    Origin,
    RequestPolicy,
    Shared,
    with_policy,
)
from ocibridge.stores.registry.trust import host_cert_files, ssl_context
from ocibridge.stores.registry.uploadpolicy import UploadPolicy

__all__ = [
    "MAX_REDIRECTS", "REDIRECT_STATUSES", "RETRY_STATUSES", "ClientOptions", "RegistryClient",
    "ENV_USER_AGENT", "RegistryOptions", "TransferStats", "TransportFailure", "base_url", "is_loopback",
    "parse_error_body", "retry_after_seconds",
]

DOCKER_HUB_API = "registry-1.docker.io"

#: The name the options had before they travelled from the CLI down as one value.
ClientOptions = RegistryOptions


def base_url(host: str, options: RegistryOptions) -> str:
    """``http://`` with plain_http, and for loopback unless a CA file or ``insecure`` asks for
    TLS; ``https://`` everywhere else."""
    api_host = DOCKER_HUB_API if host == DOCKER_HUB else host
    if options.plain_http:
        return f"http://{api_host}"
    if is_loopback(host) and not (options.tls or options.ca_file or options.insecure
                                  or host_cert_files(host) != ([], [])):
        return f"http://{api_host}"
    return f"https://{api_host}"


def with_host_settings(host: str, options: RegistryOptions) -> RegistryOptions:
    """``options`` completed by the settings file (hosts.py): flags given here win."""
    saved = host_settings(host)
    return dataclasses.replace(
        options,
        ca_file=options.ca_file or saved.ca_file,
        insecure=options.insecure or bool(saved.insecure),
        plain_http=options.plain_http or bool(saved.plain_http),
        tls=options.tls if options.tls is not None else (True if saved.plain_http is False else None),
    )


def _verify(host: str, options: RegistryOptions) -> VerifyFactory:
    """How to verify ``host``'s certificate, built when first needed (see trust.py)."""
    if options.insecure:
        return lambda: False
    return lambda: ssl_context(host, options.ca_file)


def _plain_allowed(host: str, options: RegistryOptions, where: str) -> bool:
    """Whether the user marked ``where`` (a token server's host[:port]) plain HTTP or insecure:
    on the command line for the registry's own host, or in the settings file for any host."""
    if where == host and (options.plain_http or options.insecure):
        return True
    saved = host_settings(where)
    return bool(saved.plain_http or saved.insecure)


def build_stack(host: str, options: RegistryOptions, origin: Origin, stats: TransferStats,
                bottom: httpx.BaseTransport, auth: Authenticator, backoff: Backoff) -> RetryTransport:
    """retry -> [fallback] -> redirects -> auth -> counting -> ``bottom`` (the token stack:
    [gate] -> [caller's layers] -> log -> [byte budget] -> network)."""
    stack: httpx.BaseTransport = bottom
    stack = CountingTransport(stack, stats)
    stack = AuthTransport(stack, auth, origin)
    stack = RedirectTransport(stack, host)
    if options.insecure:
        stack = FallbackTransport(stack, origin)
    return RetryTransport(stack, host, backoff, stats)


def token_stack(options: RegistryOptions, network: httpx.BaseTransport,
                rate_limit: ByteBudget | None = None) -> httpx.BaseTransport:
    """What token requests go through: the request gate, the log and the byte budget, not auth
    nor retries."""
    stack = network if rate_limit is None else RateLimitTransport(network, rate_limit)
    stack = LoggingTransport(stack)
    for layer in options.layers:  # the caller's own, above the log: it logs what they send
        stack = layer(stack)
    if options.request_gate is not None:
        stack = GateTransport(stack, options.request_gate)
    return stack


class _NotHere(httpx.BaseTransport):
    """The request builder's transport: a request sent around the stack would skip auth,
    retries and the log, so it is refused."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        raise RuntimeError("registry requests go through RegistryClient.send")


class RegistryClient:
    """Requests to one registry host, authenticated per scope, retried, never leaking auth."""

    def __init__(self, host: str, options: RegistryOptions | None = None, *,
                 credentials: CredentialFunc = anonymous):
        try:  # one spelling per registry; an ambiguous address is one line, not httpx's InvalidURL
            host = canonical_host(host)
        except OddHost as e:
            raise InvalidReference(str(e)) from None
        self.host = host
        self.options = with_host_settings(host, options or RegistryOptions())
        self.origin = Origin(base_url(host, self.options))
        self.stats = TransferStats()
        o = self.options
        rate_limit: ByteBudget | None = o.rate_budget or budget_for(o.limit_rate)
        #: the ``--limit-rate`` budget: a body read off the socket directly must take from it too
        self.rate_limit = rate_limit
        limits = httpx.Limits(max_connections=o.pool_size, max_keepalive_connections=o.pool_size)
        self._network = NetworkTransport(_verify(host, o), limits)
        # Builds requests (httpx's default headers, ours, the timeouts); sending is the stack's job.
        self._builder = httpx.Client(timeout=httpx.Timeout(o.read_timeout, connect=o.connect_timeout),
                                     follow_redirects=False, trust_env=False, transport=_NotHere(),
                                     headers={"User-Agent": o.user_agent or user_agent()})
        bottom = token_stack(o, Shared(self._network), rate_limit)
        self.auth = Authenticator(host, self._builder.build_request, bottom, credentials(host),
                                  registry_url=lambda: self.origin.base,
                                  plain_allowed=lambda where: _plain_allowed(host, o, where))
        self.backoff = Backoff(o.max_retries, o.backoff_base, o.backoff_cap, o.retry_after_cap)
        self.transport = build_stack(host, o, self.origin, self.stats, bottom, self.auth, self.backoff)
        self._uploads: UploadPolicy | None = None

    @property
    def uploads(self) -> UploadPolicy:
        """The upload form this registry takes (learnt, remembered per host: uploadpolicy.py)."""
        if self._uploads is None:
            self._uploads = UploadPolicy.load(self.host)
        return self._uploads

    @property
    def base(self) -> str:
        """The registry's base URL (plain HTTP once the insecure fallback switched to it)."""
        return self.origin.base

    def close(self) -> None:
        self._builder.close()
        self._network.close()

    def _sleep(self, attempt: int, retry_after: float | None) -> None:
        """The retry layer's backoff, for uploads that recover on their own (upload.py)."""
        self.transport.sleep(attempt, retry_after)

    def url(self, path: str) -> str:
        return path if "://" in path else self.base + path

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
        """Send down the stack: auth, redirects and (for replayable requests) bounded retries.

        A streamed body (an iterator) cannot be replayed, so it is sent once; its caller owns
        recovery (the upload resumes or restarts). Returns the response of whatever status;
        with ``stream=True`` the caller must close it.
        """
        replayable = content is None or isinstance(content, bytes)
        policy = RequestPolicy(scopes=tuple(scopes), replayable=replayable,
                               retry=replayable if retry is None else retry, on_base="://" not in path)
        request = self._builder.build_request(method, self.url(path), headers=headers, params=params,
                                          content=content)
        request.extensions = with_policy(request.extensions, policy)
        response = self.transport.handle_request(request)
        if not stream and not response.is_closed:
            read_bounded(response, f"registry {self.host}: {method} {request.url.path}")
        return response

    # -- errors ------------------------------------------------------------------------------
    def error(self, response: httpx.Response, action: str) -> RegistryError:
        """A RegistryError carrying the registry's OCI error code, as one line."""
        code, message = code_of(response)  # HEAD answers have no body: their status stands for one
        text = f"registry {self.host} {action}: "
        text += f"{code}: {message}" if code else f"HTTP {response.status_code}"
        if not code and message:
            text += f": {message}"
        limit = response.headers.get("ratelimit-limit")
        if response.status_code == 429 and limit:
            text += f" (RateLimit-Limit {limit}, remaining {response.headers.get('ratelimit-remaining', '?')})"
        sent = response.request.headers.get("authorization") is not None
        return RegistryError(_one_line_str(text), response.status_code, code, credentials_sent=sent)


def _one_line_str(text: str) -> str:
    return " ".join(text.split())



