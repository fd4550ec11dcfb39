"""Signing and verifying artifacts in the two forms cosign users meet.

* classic: a ``sha256-<hex>.sig`` tag whose layers are simple-signing payloads, each carrying
  its ECDSA signature in an annotation (:mod:`.classic`);
* bundle: a sigstore bundle v0.3 holding a DSSE-signed in-toto statement, attached as an OCI 1.1
  referrer of the signed manifest (:mod:`.sigstorebundle`).

:func:`verify_before_use` is what commands that read an artifact call to refuse an unsigned or
badly signed one before they write anything.
"""

from __future__ import annotations

import os
from typing import Any

from ocibridge.core import environment

#: The environment variable cosign reads a key's password from; ocibridge reads (and keygen takes)
#: the same one. Here, light, so the CLI can name it without loading ``cryptography``.
PASSWORD_ENV = "COSIGN_PASSWORD"
#: The password of the key named by ``--attest-key`` (push, copy, convert, serve), so that it may
#: differ from the signing key's; unset, ``$COSIGN_PASSWORD`` is read for both.
ATTEST_PASSWORD_ENV = environment.ATTEST_PASSWORD


def env_password(first: str = PASSWORD_ENV) -> tuple[str | None, str]:
    """A key's password from the environment, ``$first`` else ``$COSIGN_PASSWORD`` (set but empty
    is a password: none), and the variable it came from, for messages (``first`` when neither is set)."""
    for name in dict.fromkeys((first, PASSWORD_ENV)):
        if (value := os.environ.get(name)) is not None:
            return value, name
    return None, first

#: Public names, imported on first use: the CLI must not pay for ``cryptography`` unless it signs.
_EXPORTS = {
    "SignOptions": ".sign",
    "SignResult": ".sign",
    "sign_artifact": ".sign",
    "Verified": ".verify",
    "VerifyPolicy": ".verify",
    "verify_artifact": ".verify",
    "verify_before_use": ".policy",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
