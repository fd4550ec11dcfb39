"""Keyless (certificate) bundles, verified offline by sigstore-python against a trusted root.

Certificate chains, SCTs, transparency-log inclusion and identity matching are the library's
job; nothing here parses a certificate. sigstore-python is the ``signing`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocibridge.errors import SignatureError
from ocibridge.signing.sigstorebundle import SIGN_PREDICATE_TYPE, statement_claims


@dataclass(frozen=True)
class Identity:
    """Who must have signed: the certificate's SAN and OIDC issuer, under ``trusted_root``."""

    identity: str
    issuer: str
    trusted_root: str


def verify_keyless(bundle: bytes, who: Identity, *, dsse: bool, digest: str | None = None,
                   artifact: bytes | None = None, predicate_type: str = SIGN_PREDICATE_TYPE,
                   artifact_sha256: bytes | None = None) -> dict[str, Any]:
    """Verify a certificate bundle; DSSE ones must name ``digest`` with ``predicate_type``,
    message ones sign ``artifact`` (or the content whose sha256 is ``artifact_sha256``, a file
    hashed as it streamed). Returns the signed claims (DSSE statements only)."""
    try:
        from sigstore.errors import Error as SigstoreError
        from sigstore.models import Bundle, TrustedRoot
        from sigstore.verify import Verifier, policy
    except ImportError:
        raise SignatureError("keyless verification needs sigstore-python (pip install 'ocibridge[signing]')") from None
    try:
        root = TrustedRoot.from_file(str(Path(who.trusted_root)))
    except (OSError, ValueError, SigstoreError) as e:
        raise SignatureError(f"trusted root {who.trusted_root}: {_one_line(e)}") from None
    try:
        parsed = Bundle.from_json(bundle)
        verifier = Verifier(trusted_root=root)
        rule = policy.Identity(identity=who.identity, issuer=who.issuer)
        if dsse:
            _, payload = verifier.verify_dsse(parsed, rule)
            if digest is None:
                raise SignatureError("a DSSE bundle needs the digest it must name")
            return statement_claims(payload, digest, predicate_type)
        if artifact_sha256 is not None:  # a file hashed as it streamed: never held in memory
            from sigstore.hashes import Hashed
            from sigstore_models.common.v1 import HashAlgorithm

            verifier.verify_artifact(Hashed(algorithm=HashAlgorithm.SHA2_256, digest=artifact_sha256), parsed, rule)
            return {}
        if artifact is None:
            raise SignatureError("a message-signature bundle needs the signed bytes")
        if predicate_type != SIGN_PREDICATE_TYPE:
            raise SignatureError(f"a message signature, not an attestation of type {predicate_type}")
        verifier.verify_artifact(artifact, parsed, rule)
        return {}
    except SignatureError:
        raise
    except Exception as e:  # sigstore-python raises its own errors and pydantic/ValueErrors
        raise SignatureError(f"keyless bundle: {_one_line(e)}") from None


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()).split(" For further information visit")[0] or type(e).__name__
    return text[:300]
