"""A file against a sigstore bundle file, as ``cosign verify-blob --bundle`` checks it: keyless
(a certificate bundle, offline against a trusted root) or with a key; a message signature over
the file or a DSSE statement naming its digest. The file is hashed as it streams (it may be any
size); the bundle is read up to :data:`MAX_BUNDLE_BYTES`."""

from __future__ import annotations

from pathlib import Path

from ocibridge.core.limits import read_at_most
from ocibridge.errors import SignatureError, TooLarge
from ocibridge.oci.digest import sha256_file
from ocibridge.signing.keyless import verify_keyless
from ocibridge.signing.sigstorebundle import parse_bundle
from ocibridge.signing.verify import Verified, VerifyPolicy, verify_key_bundle

#: A sigstore bundle is a few KiB (a certificate chain, a signature, a log entry).
MAX_BUNDLE_BYTES = 4 << 20


def verify_blob(path: Path, bundle_path: Path, policy: VerifyPolicy) -> tuple[Verified, str]:
    """The signature of the bundle file over the file ``path`` that verifies under ``policy``,
    with the file's digest; raises :class:`SignatureError` (``PATH: refused: why``) otherwise."""
    try:
        bundle = read_at_most(bundle_path, MAX_BUNDLE_BYTES)
        if len(bundle) > MAX_BUNDLE_BYTES:
            raise TooLarge(f"{bundle_path}: larger than {MAX_BUNDLE_BYTES} bytes, not a bundle")
        digest, _ = sha256_file(path)  # streamed: the file to verify may be any size
    except OSError as e:
        raise SignatureError(f"{e.filename}: {e.strerror}") from None
    sha = bytes.fromhex(digest.removeprefix("sha256:"))
    content = parse_bundle(bundle)
    try:
        if content.has_certificate:
            if policy.identity is None:
                raise SignatureError("keyless bundle: pass --certificate-identity, --certificate-oidc-issuer "
                                     "and --trusted-root")
            claims = verify_keyless(bundle, policy.identity, dsse=content.envelope is not None, digest=digest,
                                    artifact_sha256=sha, predicate_type=policy.predicate_type)
            return Verified("bundle", policy.identity.identity, claims, str(bundle_path)), digest
        return verify_key_bundle(content, digest, None, policy, str(bundle_path), signed_sha256=sha), digest
    except SignatureError as e:
        raise SignatureError(f"{path}: refused: {e}") from None
