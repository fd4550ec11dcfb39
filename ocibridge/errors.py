"""Exceptions: every failure a user can cause becomes one clear line, never a traceback."""

from __future__ import annotations

import errno
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


class OcibridgeError(Exception):
    """Base of every error ocibridge raises on purpose; the CLI prints its message and exits 1."""


class UsageError(OcibridgeError):
    """A mistake in how the command was called (a bad flag value, a missing argument): exit 2."""


class InvalidReference(OcibridgeError):
    """A reference string that cannot be parsed."""


class NotFound(OcibridgeError):
    """A blob, manifest or tag that the store does not hold."""


class DigestMismatch(OcibridgeError):
    """Content whose digest or size differs from what its descriptor promises."""


class ValidationError(OcibridgeError):
    """An artifact or config that breaks the ModelPack rules; carries every reason.
    ``family`` names the model family when it is not ModelPack (``KitOps ModelKit``)."""

    def __init__(self, reasons: list[str], *, family: str = ""):
        self.reasons = reasons
        self.family = family
        super().__init__("; ".join(reasons))


class UnsafePath(OcibridgeError):
    """A path from untrusted input that would land outside its tree."""


class SourceError(OcibridgeError):
    """A source (directory, archive, store) that cannot be read as a model."""


class RegistryError(OcibridgeError):
    """An error answered by a registry, with its OCI error code where it gave one."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None,
                 credentials_sent: bool | None = None):
        self.status = status
        self.code = code
        self.credentials_sent = credentials_sent  # None: not known (no request behind the error)
        super().__init__(message)

    @property
    def credentials_hint(self) -> str:
        """What a refusal of access says of the credentials, the one rule of every command, the
        API and a mirror job's report ("" when it is no refusal, or nothing is known of them):
        none were sent (log in), or the ones sent were refused."""
        if self.status not in (401, 403):
            return ""
        if self.credentials_sent:
            return "the registry refused the credentials that were sent"
        if self.credentials_sent is not None or self.status == 401:
            return NO_CREDENTIALS
        return ""


def error_text(e: OcibridgeError) -> str:
    """An error as a report line says it: a registry's refusal with what it says of the
    credentials (a mirror job's FAILED line as the CLI's error line)."""
    hint = e.credentials_hint if isinstance(e, RegistryError) else ""
    return f"{e} ({hint})" if hint else str(e)


def os_error_text(e: OSError, places: Sequence[str]) -> str:
    """A system error as one line: the file it names, what went wrong; a full disk reported with
    no file name (a buffered write's flush has none) names ``places``, the disks the command
    writes to, so the user knows which one to free."""
    text = f"{e.filename}: {e.strerror or e}" if e.filename else str(e.strerror or e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT) and not e.filename:
        text += f" (writing to {' or '.join(places)}: free some space there, then run it again)"
    return text


#: The words for a registry that wants credentials and got none (a 401 without Authorization).
NO_CREDENTIALS = "no credentials were sent; log in with 'ocibridge login HOST', or pass -u/-p"


class ChunkTableError(OcibridgeError):
    """A chunk table that is malformed, unbound, names a hash ocibridge does not know, or that
    the bytes served do not match (ocibridge.chunks; here so the hash registry can raise it)."""


class SignatureError(OcibridgeError):
    """A signature that is missing, malformed or does not verify; or a key that cannot sign."""


class TooLarge(SourceError):
    """An input beyond one of ocibridge's limits (bytes, entries, nesting, manifests in a graph),
    refused before it costs the memory or time it asks for; the message names the limit and,
    where there is one, its override (docs/security.md lists them all). The one type for every
    "too large": a caller catches it without knowing which limit was met."""


def passes(check: Callable[[T], object], value: T, refused: type[OcibridgeError] = OcibridgeError) -> bool:
    """Whether ``check(value)`` accepts ``value`` (raises no ``refused``): the yes/no form of a
    check that raises one clear error (``is_digest`` of ``check_digest``)."""
    try:
        check(value)
    except refused:
        return False
    return True
