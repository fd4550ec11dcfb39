"""What it takes to reach a registry, as one typed value handed from the CLI down to the client.

No httpx and no credential store here: the CLI, the API and the mirror build a
:class:`RegistryOptions`, the store opener (store.py) turns its credential fields into a
:data:`CredentialFunc`, and the client (client.py) reads only the transport fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ocibridge.errors import OcibridgeError

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True)
class Credentials:
    """What the auth layer presents: a user and password, or an identity (refresh) token."""

    username: str
    password: str = ""
    identity_token: str | None = None


#: host -> its credentials, or None for anonymous; the client's only way to credentials.
CredentialFunc = Callable[[str], "Credentials | None"]


def anonymous(host: str) -> Credentials | None:
    """The credential function of a client that never authenticates."""
    return None


#: A transport of the caller's, given the one below it: what ``RegistryOptions.layers`` holds.
LayerFactory = Callable[["httpx.BaseTransport"], "httpx.BaseTransport"]


@runtime_checkable
class RequestGate(Protocol):
    """Something every request waits on before it goes out (the mirror's token bucket)."""

    def acquire(self) -> None: ...


@runtime_checkable
class ByteBudget(Protocol):
    """Bytes per second that every body sent or received takes from (ratelimit.RateLimit)."""

    def take(self, n: int) -> None: ...


@dataclass(frozen=True)
class RegistryOptions:
    """How to reach a registry; the defaults are what a careful client should do.

    Transport: plain_http, insecure, ca_file, tls, timeouts, retries, pool_size, limit_rate,
    rate_budget, user_agent, request_gate, layers (the caller's own transports, each wrapping the one below, every
    request passing them, token requests too). Credentials (read by the store opener, never by the client): username,
    password, authfile, docker_config. Store: chunk_size, part_size, parts_in_flight, blob_homes_on_disk.
    """

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
    # A budget of the caller's own, shared only by the clients it is handed to (one mirror
    # call's cap, so two calls in threads of one process do not throttle each other); wins
    # over limit_rate, whose budget is the process's for that rate.
    rate_budget: ByteBudget | None = None
    user_agent: str | None = None  # every request's User-Agent (None: $OCIBRIDGE_USER_AGENT, else ocibridge/VERSION)
    request_gate: RequestGate | None = None  # every request waits for it (mirror rate_limit)
    layers: tuple[LayerFactory, ...] = ()  # the caller's transports, innermost first
    chunk_size: int | None = None  # PATCH uploads of this many bytes (None: one PUT)
    part_size: int | None = None  # ranged pulls: bytes per part
    parts_in_flight: int | None = None  # ranged pulls: parts at once per blob
    # where a manifest read saw blobs goes to the on-disk index of mount sources (blobhomes.py);
    # False: kept in this process only, for a read that promises to write nothing (load_tensors)
    blob_homes_on_disk: bool = True

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> RegistryOptions:
        """Options from keyword values (the defaults for the rest)."""
        return cls().updated(values)

    def updated(self, values: Mapping[str, Any]) -> RegistryOptions:
        """These options with some fields changed, refusing names that are not options (a
        typo would otherwise be silently ignored)."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise OcibridgeError(f"unknown registry option(s): {', '.join(unknown)}")
        return dataclasses.replace(self, **values)

    def with_gate(self, gate: RequestGate | None) -> RegistryOptions:
        """These options with every request waiting for ``gate`` (None: no gate)."""
        return dataclasses.replace(self, request_gate=gate)

    def for_mirror(self) -> RegistryOptions:
        """These options for a pull-through mirror of the registry named: -u/-p and the TLS
        flags were given for that registry, so a mirror gets its own from the settings and
        credential files."""
        return dataclasses.replace(self, username=None, password=None, ca_file=None,
                                   plain_http=False, insecure=False)
