"""Connection failures that no retry can mend, told apart from the ones worth retrying.

A refused connection, a name that does not resolve and a certificate the client does not
trust answer the same way the next second: retrying them only delays the message by the
whole backoff (5-12 s). They end the command at once, as one line with the flag that fixes
the usual cause.
"""

from __future__ import annotations

import socket
import ssl

from ocibridge.errors import RegistryError

#: What OpenSSL says when the peer answers a TLS hello with plain HTTP.
_PLAIN_HTTP_MARKERS = ("WRONG_VERSION_NUMBER", "record layer failure", "http request",
                       "PACKET_LENGTH_TOO_LONG", "UNEXPECTED_EOF_WHILE_READING")


class Outage(RegistryError):
    """Nothing answered: the registry could not be reached at all (refused, a name that does
    not resolve, timed out or cut off after every retry), as opposed to reached and not trusted,
    or answering 401/404: what ``path`` may answer from the model cache."""


class RegistryUnreachable(RegistryError):
    """The registry cannot be reached or trusted; retrying would not change that. ``outage``:
    it could not be reached at all (refused, a name that does not resolve), as opposed to
    reached and not trusted: what ``path`` may answer from the model cache."""



class RegistryDown(RegistryUnreachable, Outage):
    """Nothing answered: the connection was refused or the host name does not resolve."""


def is_outage(error: BaseException) -> bool:
    """Whether ``error`` says the registry could not be reached (refused, no such host, timed
    out or cut off after every retry) rather than that it answered (401, 404, ...) or was not
    trusted."""
    return any(isinstance(cause, Outage) for cause in _causes(error))


def _causes(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    return chain


def _text(error: BaseException) -> str:
    return " ".join((str(error) or type(error).__name__).split())


def classify(host: str, url: str, error: BaseException) -> RegistryUnreachable | None:
    """The fatal error ``error`` stands for, with its hint; None when a retry may help."""
    chain = _causes(error)
    every_text = " ".join(_text(c) for c in chain)
    for cause in chain:
        if isinstance(cause, ssl.SSLCertVerificationError):
            reason = cause.verify_message or _text(cause)
            return RegistryUnreachable(
                f"registry {host}: TLS certificate not trusted ({reason}) "
                "(pass --ca-file FILE with the registry's CA, or --insecure)")
        if isinstance(cause, ssl.SSLError):
            if url.startswith("https://") and any(m in every_text for m in _PLAIN_HTTP_MARKERS):
                return RegistryUnreachable(
                    f"registry {host}: TLS handshake failed ({_text(cause)}); it seems to "
                    "speak plain HTTP (pass --plain-http)")
            return RegistryUnreachable(f"registry {host}: TLS handshake failed ({_text(cause)})")
        if isinstance(cause, socket.gaierror):
            return RegistryDown(
                f"registry {host}: cannot resolve the host name ({_text(cause)})")
        if isinstance(cause, ConnectionRefusedError):
            return RegistryDown(
                f"registry {host}: connection refused (is the registry running, and the port right?)")
    lowered = every_text.lower()
    if "name or service not known" in lowered or "nodename nor servname" in lowered \
            or "temporary failure in name resolution" in lowered:
        return RegistryDown(f"registry {host}: cannot resolve the host name ({every_text})")
    if "connection refused" in lowered:
        return RegistryDown(
            f"registry {host}: connection refused (is the registry running, and the port right?)")
    if "certificate verify failed" in lowered:
        return RegistryUnreachable(
            f"registry {host}: TLS certificate not trusted "
            "(pass --ca-file FILE with the registry's CA, or --insecure)")
    return None
