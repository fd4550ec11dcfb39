"""``verify``: does a manifest carry a signature that verifies under a policy?

Both forms are tried: each classic layer (signature annotation over the payload bytes, payload
naming the digest) and each bundle referrer (DSSE statement naming the digest, or a message
signature over the manifest bytes). The artifact passes when at least one verifies and carries
the claims the policy asks for. The ``docker-reference`` a signature names is not compared
with where the artifact is now, as cosign does not: a signature stays valid through mirrors.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.errors import OcibridgeError, SignatureError
from ocibridge.oci.models import Descriptor
from ocibridge.signing import keys
from ocibridge.signing.attach import find_signatures
from ocibridge.signing.classic import SignatureLayer
from ocibridge.signing.coverage import Trusted, covers, uncovered_reason
from ocibridge.signing.keyless import Identity, verify_keyless
from ocibridge.signing.oms import OmsStatement, compare_files, is_oms_predicate, parse_oms, predicate_type_of
from ocibridge.signing.payload import parse_simple_signing
from ocibridge.signing.sigstorebundle import (
    SIGN_PREDICATE_TYPE,
    BundleContent,
    KeyMismatch,
    parse_bundle,
    statement_claims,
    verify_envelope,
)
from ocibridge.stores.base import Store

CERTIFICATE_ANNOTATION = "dev.sigstore.cosign/certificate"


@dataclass
class VerifyPolicy:
    """Who may have signed: any of ``keys`` (name, public key), or a keyless ``identity``;
    ``claims`` every accepted signature must carry (``--annotation``). ``predicate_type``: what
    the signed statement must be; cosign's signature predicate unless an attestation of another
    type is asked for by name (``verify --attestation-type``): never both at once."""

    keys: list[tuple[str, keys.PublicKey]] = field(default_factory=list)
    identity: Identity | None = None
    claims: dict[str, str] = field(default_factory=dict)
    predicate_type: str = SIGN_PREDICATE_TYPE

    @property
    def attestation(self) -> bool:
        """Whether this policy asks for an attestation rather than a signature."""
        return self.predicate_type != SIGN_PREDICATE_TYPE

    def __post_init__(self) -> None:
        if not self.keys and self.identity is None:
            raise SignatureError("verification needs a key (--key) or a certificate identity, issuer "
                                 "and trusted root")

    @classmethod
    def from_files(cls, key_paths: list[str], *, identity: str | None = None, issuer: str | None = None,
                   trusted_root: str | None = None, claims: dict[str, str] | None = None,
                   predicate_type: str = SIGN_PREDICATE_TYPE) -> VerifyPolicy:
        who = None
        if identity or issuer or trusted_root:
            missing = [flag for flag, value in (("--certificate-identity", identity),
                                                ("--certificate-oidc-issuer", issuer),
                                                ("--trusted-root", trusted_root)) if not value]
            if missing:
                raise SignatureError(f"keyless verification also needs {', '.join(missing)}")
            assert identity and issuer and trusted_root
            who = Identity(identity, issuer, trusted_root)
        return cls([(p, keys.load_public_key(p)) for p in key_paths], who, dict(claims or {}), predicate_type)

    def describe(self) -> str:
        parts = [f"key {name}" for name, _ in self.keys]
        if self.identity:
            parts.append(f"identity {self.identity.identity} ({self.identity.issuer})")
        return " or ".join(parts)


@dataclass
class Verified:
    """One signature that verified."""

    form: str  # classic | bundle | oms | attestation (coverage.Form)
    signer: str  # the key's name, or the certificate identity
    claims: dict[str, Any] = field(default_factory=dict)
    where: str = ""  # the .sig tag or the referrer digest

    def as_dict(self) -> dict[str, Any]:
        return {"form": self.form, "signer": self.signer, "claims": self.claims, "where": self.where}


def verify_artifact(store: Store, subject: Descriptor, policy: VerifyPolicy, *, trusts: Trusted) -> list[Verified]:
    """Every signature of ``subject`` that verifies under ``policy`` and whose signed payload
    covers what the caller ``trusts`` (signing/coverage.py); raises when there is none."""
    found = find_signatures(store, subject)
    verified: list[Verified] = []
    reasons: list[str] = []
    for layer in found.classic:
        _collect(lambda layer=layer: _classic(layer, subject, policy), verified, reasons)
    manifest: bytes | None = None
    from ocibridge.signing.omsfiles import ManifestListing  # the layer readers: only where OMS is met

    listing = ManifestListing(store, subject)  # read only for an OMS signature that verified

    attestations = 0  # DSSE bundles of another predicate (an AI-BOM, a provenance): not signatures
    for ref, data in found.bundles:
        predicate = _predicate_of(data)
        signature_like = predicate in (None, policy.predicate_type) or is_oms_predicate(predicate)
        if not policy.attestation and not signature_like:
            attestations += 1
            continue
        if manifest is None and b'"messageSignature"' in data:
            manifest = store.fetch_bytes(subject)
        if is_oms(data):
            _collect(lambda ref=ref, data=data: verify_oms(data, listing.of, policy, ref.digest,
                                                           f"manifest {subject.digest[:19]}"),
                     verified, reasons)
            continue
        _collect(lambda ref=ref, data=data, m=manifest: _bundle(data, ref.digest, subject.digest, m, policy),
                 verified, reasons)
    covering = [v for v in verified if covers(v.form, trusts)]
    if covering:
        return covering
    reasons.extend(uncovered_reason(v.form, v.where, trusts) for v in verified)
    besides = f"; {attestations} attestation(s), which are no signatures" if attestations else ""
    if not reasons:
        raise SignatureError(f"{subject.digest} is not signed (no {_sig_tag(subject)} tag, no sigstore "
                             f"bundle referrer{besides})")
    unique = list(dict.fromkeys(reasons))
    raise SignatureError(f"{subject.digest}: {len(reasons)} signature(s), none verifies with "
                         f"{policy.describe()} and covers the {trusts.value}: {'; '.join(unique[:3])}{besides}")


def _sig_tag(subject: Descriptor) -> str:
    from ocibridge.signing.classic import signature_tag

    return signature_tag(subject.digest)


def _collect(check: Any, verified: list[Verified], reasons: list[str]) -> None:
    try:
        verified.append(check())
    except SignatureError as e:
        reasons.append(str(e))


def _require_claims(claims: dict[str, Any], policy: VerifyPolicy) -> None:
    for key, value in policy.claims.items():
        if str(claims.get(key)) != value or key not in claims:
            raise SignatureError(f"claim {key}={value} missing (signed: {_show(claims)})")


def _show(claims: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(claims.items())) or "none"


def _classic(layer: SignatureLayer, subject: Descriptor, policy: VerifyPolicy) -> Verified:
    where = _sig_tag(subject)
    notes = layer.descriptor.annotations or {}
    if policy.attestation:
        raise SignatureError(f"{where}: a signature, not an attestation of type {policy.predicate_type}")
    if layer.signature is None:
        raise SignatureError(f"{where}: a layer has no signature annotation")
    if CERTIFICATE_ANNOTATION in notes and not policy.keys:
        raise SignatureError(f"{where}: keyless classic signatures are not verified here (use a bundle)")
    if not policy.keys:
        raise SignatureError(f"{where}: signed with a key; pass --key")
    try:
        signature = base64.b64decode(layer.signature, validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError(f"{where}: signature annotation is not base64") from None
    assert layer.payload is not None
    signer = next((name for name, key in cosign_keys(policy, where) if keys.verifies(key, signature, layer.payload)),
                  None)
    if signer is None:
        raise SignatureError(f"{where}: signature does not verify")
    payload = parse_simple_signing(layer.payload)
    if payload.digest != subject.digest:
        raise SignatureError(f"{where}: payload signs {payload.digest}, not {subject.digest}")
    _require_claims(payload.claims, policy)
    return Verified("classic", signer, payload.claims, where)


def _bundle(data: bytes, where: str, digest: str, manifest: bytes | None, policy: VerifyPolicy) -> Verified:
    content = parse_bundle(data)
    if content.has_certificate:
        if policy.identity is None:
            raise SignatureError(f"bundle {_short(where)}: keyless (certificate) bundle; pass a certificate "
                                 "identity, issuer and trusted root")
        if content.envelope is None and policy.attestation:
            raise SignatureError(f"bundle {_short(where)}: a message signature, not an attestation of type "
                                 f"{policy.predicate_type}")
        claims = verify_keyless(data, policy.identity, dsse=content.envelope is not None, digest=digest,
                                artifact=manifest, predicate_type=policy.predicate_type)
        _require_claims(claims, policy)
        return Verified(_bundle_form(policy), policy.identity.identity, claims, where)
    return verify_key_bundle(content, digest, manifest, policy, where)


def verify_key_bundle(content: BundleContent, digest: str, signed: bytes | None, policy: VerifyPolicy,
                      where: str, *, signed_sha256: bytes | None = None) -> Verified:
    """A key bundle: DSSE naming ``digest``, or a message signature over ``signed`` — or over
    the content whose sha256 is ``signed_sha256``, for a file hashed as it streams (verify-blob)."""
    short = f"bundle {_short(where)}"
    if not policy.keys:
        raise SignatureError(f"{short}: signed with a key; pass --key")
    if content.envelope is not None:
        name, payload = _envelope_payload(content.envelope, cosign_keys(policy, short), short)
        claims = statement_claims(payload, digest, policy.predicate_type)
        _require_claims(claims, policy)
        return Verified(_bundle_form(policy), name, claims, where)
    assert content.message_digest is not None and content.message_signature is not None
    if policy.attestation:
        raise SignatureError(f"{short}: a message signature, not an attestation of type {policy.predicate_type}")
    if signed_sha256 is None and signed is not None:
        signed_sha256 = hashlib.sha256(signed).digest()
    if signed_sha256 is None or signed_sha256 != content.message_digest:
        raise SignatureError(f"{short}: message digest is not that of {digest}")
    for name, key in cosign_keys(policy, short):
        if keys.verifies_prehashed(key, content.message_signature, signed_sha256):
            _require_claims({}, policy)
            return Verified("bundle", name, {}, where)
    raise SignatureError(f"{short}: message signature does not verify")


def cosign_keys(policy: VerifyPolicy, where: str) -> list[tuple[str, keys.PublicKey]]:
    """The policy's P-256 keys: the cosign forms are made with P-256 only (P-384 and P-521
    keys verify OMS signatures); none left is said as such, not as a signature that fails."""
    found = [(name, key) for name, key in policy.keys if keys.curve_of(key) == "P-256"]
    if not found:
        curves = ", ".join(sorted({keys.curve_of(key) for _, key in policy.keys}))
        raise SignatureError(f"{where}: a cosign signature, verified with P-256 keys; the key given is {curves} "
                             "(P-384 and P-521 keys verify OMS signatures)")
    return found


def _bundle_form(policy: VerifyPolicy) -> str:
    """A DSSE bundle verified for a signature is the bundle form; for another predicate type,
    an attestation (coverage.Form.ATTESTATION: it covers its subject's statement only)."""
    return "attestation" if policy.attestation else "bundle"


def is_oms(data: bytes) -> bool:
    """Whether a bundle's (not yet verified) DSSE payload says it is an OMS statement."""
    return is_oms_predicate(_predicate_of(data))


def _predicate_of(data: bytes) -> str | None:
    """The predicate type a bundle's (not yet verified) DSSE payload names; None for a message
    signature or a bundle that does not parse (verifying it says what is wrong)."""
    try:
        envelope = boundedjson.loads(data).get("dsseEnvelope")
        payload = base64.b64decode(envelope["payload"], validate=True)
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
        return None
    said = predicate_type_of(payload)
    return said if isinstance(said, str) else None


def _short(where: str) -> str:
    """Where a signature was found, for a message: a digest shortened (``sha256:`` and 12 hex
    digits), a file path or a reference whole (cut, it names nothing)."""
    algorithm, _, hexpart = where.partition(":")
    if algorithm in ("sha256", "sha512") and len(hexpart) > 12 and all(c in "0123456789abcdef" for c in hexpart):
        return where[:19]
    return where


def verify_oms_signature(content: BundleContent, policy: VerifyPolicy, where: str) -> tuple[Verified, OmsStatement]:
    """The signer and the statement of an OMS bundle whose DSSE signature verifies with one of
    the policy's keys; raises otherwise. The files are compared by the caller."""
    short = f"OMS signature {_short(where)}"
    if policy.attestation:
        raise SignatureError(f"{short}: a model signature, not an attestation of type {policy.predicate_type}")
    if content.has_certificate:
        raise SignatureError(f"{short}: certificate OMS signatures (sigstore keyless or an X.509 chain) are not "
                             "verified here (key signatures only)")
    if not policy.keys or content.envelope is None:
        raise SignatureError(f"{short}: signed with a key; pass --key")
    name, payload = _envelope_payload(content.envelope, policy.keys, short)
    statement = parse_oms(payload)
    if policy.claims:
        raise SignatureError(f"{short}: carries no claims ({', '.join(sorted(policy.claims))} asked)")
    return Verified("oms", name, {}, where), statement


def _envelope_payload(envelope: dict[str, Any], named_keys: Sequence[tuple[str, keys.PublicKey]],
                      short: str) -> tuple[str, bytes]:
    """The name of the first key a DSSE envelope verifies with, and its payload. A key that does
    not verify moves on to the next; an envelope refused for what it is (malformed, its payload
    type) is refused at once, by that reason, whichever key is tried."""
    for name, key in named_keys:
        try:
            return name, verify_envelope(envelope, key)
        except KeyMismatch:
            continue
        except SignatureError as e:
            raise SignatureError(f"{short}: {e}") from None
    raise SignatureError(f"{short}: DSSE signature does not verify")


def verify_oms(data: bytes, files: Callable[[OmsStatement], Mapping[str, str]], policy: VerifyPolicy,
               where: str, what: str) -> Verified:
    """The OMS bundle ``data`` verifies with the policy's keys and signs exactly
    ``files(statement)`` (the model's resources hashed as the statement says, asked only once the
    signature verified): the statement's list must be the model's, so it binds to this model
    and no other."""
    verified, statement = verify_oms_signature(parse_bundle(data), policy, where)
    try:
        listed = files(statement)
    except SignatureError:
        raise
    except OcibridgeError as e:  # a layer that cannot be listed: this signature is not accepted
        raise SignatureError(f"OMS signature {_short(where)}: cannot list the model's files: {e}") from None
    compare_files(statement.files, listed, what)
    return verified


def verify_attestation(data: bytes, where: str, digest: str, policy: VerifyPolicy) -> Verified:
    """One attestation bundle (DSSE) about ``digest``, under ``policy`` (its predicate type set
    to the attestation's): a pull writing attestations beside the files checks each first."""
    return _bundle(data, where, digest, None, policy)
