"""Evaluating a containers policy's requirements for one manifest, as containers/image does
(``signature/policy_eval_sigstore.go``): ``sigstoreSigned`` is met by one signature that
verifies with one of the requirement's keys, whose signed payload names the manifest's digest
*and* a Docker reference the ``signedIdentity`` accepts; the others are ignored.

What each form's signed payload covers decides what it can vouch for (docs/signing.md, "What
each form covers"): a cosign classic signature and a cosign bundle statement name the manifest
digest and a repository, so they can meet ``sigstoreSigned``; an OMS signature lists the model's
files and names no manifest and no repository, so it never does; an attestation (another
predicate type) is no signature at all.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.errors import SignatureError
from ocibridge.oci.digest import split_digest
from ocibridge.oci.models import Descriptor
from ocibridge.signing import keys
from ocibridge.signing.attach import find_signatures
from ocibridge.signing.classic import SignatureLayer, signature_tag
from ocibridge.signing.containers_policy import ACCEPT, CLEAN_SCAN, CleanScanCheck, Decision, Requirement, Scope
from ocibridge.signing.payload import parse_simple_signing
from ocibridge.signing.sigstorebundle import parse_bundle, statement_claims, verify_envelope
from ocibridge.signing.verify import Verified, is_oms
from ocibridge.stores.base import Store

SET_ANNOTATION = "dev.sigstore.cosign/bundle"
Keys = list[tuple[str, keys.PublicKey]]


def evaluate(decision: Decision, store: Store, subject: Descriptor, name: str, *,
             clean_scan: CleanScanCheck) -> list[Verified]:
    """Every requirement of ``decision`` holds for ``subject`` (what was accepted, one per
    ``sigstoreSigned``; ``ocibridgeCleanScan``, judged by ``clean_scan``, accepts no signature),
    or :class:`SignatureError`: ``NAME: refused by the policy FILE (scope): why``."""
    decision.refuse_early(name)
    accepted: list[Verified] = []
    for requirement in decision.requirements:
        if requirement.type == ACCEPT:
            continue
        try:
            if requirement.type == CLEAN_SCAN:  # a judgement of the files, no signature of the artifact
                clean_scan(store, subject, requirement)
                continue
            accepted.append(sigstore_signed(store, subject, requirement, decision.scope))
        except SignatureError as e:
            raise SignatureError(f"{name}: refused by the policy {decision.where()}: "
                                 f"{requirement.describe()}: {e}") from None
    return accepted


def sigstore_signed(store: Store, subject: Descriptor, requirement: Requirement, scope: Scope) -> Verified:
    """The first signature of ``subject`` that meets ``requirement``; raises saying why none does."""
    if requirement.fulcio is not None or requirement.pki is not None:
        raise SignatureError("fulcio and pki (certificate) requirements are not verified by ocibridge; "
                             "use keyPath, keyPaths, keyData or keyDatas")
    public = [(k.name, keys.public_key_from_pem(k.read(), k.name)) for k in requirement.keys]
    rekor = [(k.name, keys.public_key_from_pem(k.read(), k.name)) for k in requirement.rekor_keys]
    found = find_signatures(store, subject)
    reasons: list[str] = []
    for layer in found.classic:
        try:
            return _classic(layer, subject, public, rekor, requirement, scope)
        except SignatureError as e:
            reasons.append(str(e))
    for ref, data in found.bundles:
        try:
            return _bundle(data, ref.digest, subject, public, rekor, requirement, scope)
        except SignatureError as e:
            reasons.append(str(e))
    if not reasons:
        raise SignatureError(f"a signature was required, but {subject.digest} has none (no "
                             f"{signature_tag(subject.digest)} tag, no sigstore bundle referrer)")
    unique = list(dict.fromkeys(reasons))
    if len(unique) == 1:
        raise SignatureError(unique[0])
    raise SignatureError(f"none of {len(reasons)} signatures was accepted: {'; '.join(unique[:3])}")


def _classic(layer: SignatureLayer, subject: Descriptor, public: Keys, rekor: Keys, requirement: Requirement,
             scope: Scope) -> Verified:
    where = signature_tag(subject.digest)
    notes = layer.descriptor.annotations or {}
    encoded = layer.signature
    if encoded is None:
        raise SignatureError(f"{where}: a layer has no dev.cosignproject.cosign/signature annotation")
    assert layer.payload is not None
    try:
        signature = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError(f"{where}: signature annotation is not base64") from None
    candidates = public
    if rekor:
        candidates = [(n, k) for n, k in public if _rekor_set_matches(notes.get(SET_ANNOTATION), rekor, k,
                                                                      signature, layer.payload)]
        if not candidates:
            raise SignatureError(f"{where}: no Rekor SET of the requirement's Rekor key vouches for it")
    signer = next((n for n, k in candidates if keys.verifies(k, signature, layer.payload)), None)
    if signer is None:
        raise SignatureError(f"{where}: signature does not verify with {_names(public)}")
    payload = parse_simple_signing(layer.payload)
    if payload.digest != subject.digest:
        raise SignatureError(f"{where}: signature for digest {payload.digest} does not match")
    _identity(requirement, scope, payload.reference, where)
    return Verified("classic", signer, payload.claims, where)


def _bundle(data: bytes, where: str, subject: Descriptor, public: Keys, rekor: Keys, requirement: Requirement,
            scope: Scope) -> Verified:
    short = f"bundle {where[:19]}"
    if is_oms(data):  # coverage: the files only; no manifest digest, no repository
        raise SignatureError(f"OMS signature {where[:19]}: covers the model's files, not the manifest digest "
                             "and repository sigstoreSigned asks for")
    content = parse_bundle(data)
    if content.has_certificate:
        raise SignatureError(f"{short}: a keyless (certificate) bundle; the requirement names keys")
    if content.envelope is None:
        raise SignatureError(f"{short}: a message signature names no repository (no signedIdentity can match)")
    if rekor:
        raise SignatureError(f"{short}: Rekor requirements are checked on classic signatures (their SET) only")
    for signer, key in public:
        try:
            payload = verify_envelope(content.envelope, key)
        except SignatureError:
            continue
        claims = statement_claims(payload, subject.digest)  # cosign's signature predicate, this digest
        _identity(requirement, scope, _subject_name(payload, subject.digest), short)
        return Verified("bundle", signer, claims, where)
    raise SignatureError(f"{short}: DSSE signature does not verify with {_names(public)}")


def _identity(requirement: Requirement, scope: Scope, signed: str, where: str) -> None:
    if not requirement.identity.matches(scope.docker, signed):
        raise SignatureError(f"{where}: signature for identity {signed!r} is not accepted "
                             f"({requirement.identity.describe()})")


def _subject_name(payload: bytes, digest: str) -> str:
    algorithm, hexpart = split_digest(digest)
    for entry in boundedjson.loads(payload).get("subject") or []:
        if isinstance(entry, dict) and (entry.get("digest") or {}).get(algorithm) == hexpart:
            name = entry.get("name")
            return name if isinstance(name, str) else ""
    return ""


def _names(found: Keys) -> str:
    return " or ".join(name for name, _ in found)


def _rekor_set_matches(annotation: str | None, rekor: Keys, key: keys.PublicKey, signature: bytes,
                       payload: bytes) -> bool:
    """containers/image's ``VerifyRekorSET`` for a key signature: the SET is signed by a Rekor
    key over the canonical entry, and the entry (a hashedrekord 0.0.1) names this key, this
    signature and the payload's sha256."""
    if not annotation:
        return False
    try:
        bundle = boundedjson.loads(annotation)
        set_signature = base64.b64decode(bundle["SignedEntryTimestamp"], validate=True)
        entry: dict[str, Any] = bundle["Payload"]
        if set(entry) != {"body", "integratedTime", "logIndex", "logID"}:
            return False
        canonical = json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        if not any(keys.verifies(k, set_signature, canonical) for _, k in rekor):
            return False
        body = boundedjson.loads(base64.b64decode(entry["body"], validate=True))
        if body.get("kind") != "hashedrekord" or body.get("apiVersion") != "0.0.1":
            return False
        spec = body["spec"]
        logged_key = base64.b64decode(spec["signature"]["publicKey"]["content"], validate=True)
        logged_signature = base64.b64decode(spec["signature"]["content"], validate=True)
        hashed = spec["data"]["hash"]
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
        return False
    if _pem_body(logged_key) != _pem_body(keys.public_pem(key)) or logged_signature != signature:
        return False
    return bool(hashed.get("algorithm") == "sha256" and hashed.get("value") == hashlib.sha256(payload).hexdigest())


def _pem_body(pem: bytes) -> bytes:
    lines = [line.strip() for line in pem.strip().splitlines()]
    if len(lines) < 3 or not lines[0].startswith(b"-----BEGIN ") or not lines[-1].startswith(b"-----END "):
        return b"\x00not PEM"
    try:
        return base64.b64decode(b"".join(lines[1:-1]), validate=True)
    except (binascii.Error, ValueError):
        return b"\x00not PEM"
