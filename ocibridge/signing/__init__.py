"""Signing and verifying artifacts in the two forms cosign users meet.

* classic: a ``sha256-<hex>.sig`` tag whose layers are simple-signing payloads, each carrying
  its ECDSA signature in an annotation (:mod:`.classic`);
* bundle: a sigstore bundle v0.3 holding a DSSE-signed in-toto statement, attached as an OCI 1.1
  referrer of the signed manifest (:mod:`.bundle`).

:func:`verify_before_use` is what commands that read an artifact call to refuse an unsigned or
badly signed one before they write anything.
"""

from __future__ import annotations

from .policy import verify_before_use
from .sign import SignOptions, SignResult, sign_artifact
from .verify import Verified, VerifyPolicy, verify_artifact

__all__ = [
    "SignOptions",
    "SignResult",
    "Verified",
    "VerifyPolicy",
    "sign_artifact",
    "verify_artifact",
    "verify_before_use",
]
