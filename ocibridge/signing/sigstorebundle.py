"""The sigstore bundle (v0.3) cosign v3 writes for an image signature, and its OCI referrer.

The signed content is a DSSE envelope around an in-toto statement whose subject is the
manifest digest and whose predicate type is ``https://sigstore.dev/cosign/sign/v1``; claims
(``--annotation``) are the subject's annotations, so they are signed too. A key-signed bundle
names its key by a hint and carries no transparency-log entry (nothing here talks to Rekor).

The bundle is the one layer of a manifest with ``artifactType`` = the bundle media type, an
empty config and ``subject`` = the signed manifest: an OCI 1.1 referrer.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ocibridge.core import boundedjson
from ocibridge.core.terminal import one_line
from ocibridge.errors import SignatureError
from ocibridge.oci.digest import split_digest
from ocibridge.oci.empty import empty_descriptor
from ocibridge.oci.mediatypes import ANNOTATION_CREATED, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest

if TYPE_CHECKING:  # copies import this module: ``cryptography`` only when signing or verifying
    from ocibridge.signing import keys

BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
#: Media types bundles are written under (older: a ``version`` parameter).
BUNDLE_MEDIA_TYPES = (BUNDLE_MEDIA_TYPE, "application/vnd.dev.sigstore.bundle+json;version=0.3")
IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_V1 = "https://in-toto.io/Statement/v1"
STATEMENT_TYPES = (STATEMENT_V1, "https://in-toto.io/Statement/v0.1")
SIGN_PREDICATE_TYPE = "https://sigstore.dev/cosign/sign/v1"
CONTENT_ANNOTATION = "dev.sigstore.bundle.content"
PREDICATE_ANNOTATION = "dev.sigstore.bundle.predicateType"


def is_bundle_type(media_type: str | None) -> bool:
    return (media_type or "").replace(" ", "") in BUNDLE_MEDIA_TYPES


def statement(reference: str, digest: str, claims: dict[str, str] | None = None) -> bytes:
    """The in-toto statement that says: ``reference`` at ``digest`` is signed."""
    algorithm, hexpart = split_digest(digest)
    subject: dict[str, Any] = {"name": reference, "digest": {algorithm: hexpart}}
    if claims:
        subject["annotations"] = dict(sorted(claims.items()))
    doc = {"_type": STATEMENT_V1, "subject": [subject], "predicateType": SIGN_PREDICATE_TYPE, "predicate": {}}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what a DSSE signature is made over."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def make_bundle(key: keys.PrivateKey, payload: bytes, hint: str | None = None) -> bytes:
    """A v0.3 bundle: ``payload`` (a statement) in a DSSE envelope signed by ``key``, naming
    the key by ``hint`` (default: cosign's, base64 SHA-256 of the DER key)."""
    from ocibridge.signing import keys

    signature = keys.sign(key, pae(IN_TOTO_PAYLOAD_TYPE, payload))
    doc = {
        "mediaType": BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {"hint": hint or keys.key_hint(key)}, "tlogEntries": []},
        "dsseEnvelope": {
            "payload": _b64(payload),
            "payloadType": IN_TOTO_PAYLOAD_TYPE,
            "signatures": [{"sig": _b64(signature), "keyid": ""}],
        },
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def referrer_manifest(subject: Descriptor, bundle: bytes,
                      predicate_type: str = SIGN_PREDICATE_TYPE) -> tuple[Descriptor, bytes, Descriptor]:
    """(bundle layer descriptor, manifest bytes, manifest descriptor) of the referrer."""
    layer = Descriptor.for_bytes(BUNDLE_MEDIA_TYPE, bundle)
    annotations = {CONTENT_ANNOTATION: "dsse-envelope", PREDICATE_ANNOTATION: predicate_type}
    created = _created()
    if created:
        annotations[ANNOTATION_CREATED] = created
    manifest = Manifest(
        mediaType=OCI_MANIFEST,
        artifactType=BUNDLE_MEDIA_TYPE,
        config=empty_descriptor(),
        layers=[layer],
        subject=Descriptor(mediaType=subject.mediaType, digest=subject.digest, size=subject.size),
        annotations=annotations,
    )
    data = manifest.to_json_bytes()
    return layer, data, Descriptor.for_bytes(OCI_MANIFEST, data)


def _created() -> str | None:
    """``org.opencontainers.image.created`` only from ``SOURCE_DATE_EPOCH``: a clock would make
    every signing of the same digest a new referrer."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not epoch.isdigit():
        return None
    return datetime.fromtimestamp(int(epoch), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class BundleContent:
    """What a bundle holds, before any signature is checked."""

    raw: dict[str, Any]
    key_hint: str | None
    has_certificate: bool
    envelope: dict[str, Any] | None
    message_digest: bytes | None
    message_signature: bytes | None
    claims: dict[str, Any] = field(default_factory=dict)


def parse_bundle(data: bytes) -> BundleContent:
    try:
        doc = boundedjson.loads(data)
        material = doc["verificationMaterial"]
        if not is_bundle_type(doc.get("mediaType")):
            raise SignatureError(f"not a sigstore bundle v0.3 (mediaType {doc.get('mediaType')!r})")
        hint = (material.get("publicKey") or {}).get("hint")
        has_cert = "certificate" in material or "x509CertificateChain" in material
        envelope = doc.get("dsseEnvelope")
        digest = signature = None
        if "messageSignature" in doc:
            message = doc["messageSignature"]
            if message["messageDigest"]["algorithm"] != "SHA2_256":
                raise SignatureError("bundle message digest is not SHA2_256")
            digest = base64.b64decode(message["messageDigest"]["digest"])
            signature = base64.b64decode(message["signature"])
        elif envelope is None:
            raise SignatureError("bundle holds neither a DSSE envelope nor a message signature")
    except (ValueError, KeyError, TypeError) as e:
        raise SignatureError(f"malformed sigstore bundle ({type(e).__name__}: {e})") from None
    return BundleContent(doc, hint, has_cert, envelope, digest, signature)


class KeyMismatch(SignatureError):
    """No signature of an envelope verifies with the key asked: another key may (any other
    refusal of the envelope is the envelope's own, whichever key is tried)."""


def verify_envelope(envelope: dict[str, Any], key: keys.PublicKey) -> bytes:
    """The envelope's payload if one of its signatures verifies with ``key``; else raises."""
    from ocibridge.signing import keys

    try:
        payload = base64.b64decode(envelope["payload"], validate=True)
        payload_type = envelope["payloadType"]
        signatures = [base64.b64decode(s["sig"]) for s in envelope["signatures"]]
    except (ValueError, KeyError, TypeError):
        raise SignatureError("malformed DSSE envelope") from None
    signed = pae(payload_type, payload)
    if not any(keys.verifies(key, s, signed) for s in signatures):
        raise KeyMismatch("DSSE signature does not verify with the key")
    if payload_type != IN_TOTO_PAYLOAD_TYPE:
        raise SignatureError(f"DSSE payload type {payload_type!r} is not an in-toto statement")
    return payload


def statement_claims(payload: bytes, digest: str, predicate_type: str = SIGN_PREDICATE_TYPE) -> dict[str, Any]:
    """The claims of a statement whose subject is ``digest`` and whose signed predicate type is
    ``predicate_type``; raises otherwise.

    The predicate type is what separates a signature from an attestation: a key that signs
    SLSA provenance (or any other predicate) about a digest has not signed the artifact, so a
    statement of another type never counts as a signature (docs/security.md, invariant).
    """
    algorithm, hexpart = split_digest(digest)
    try:
        doc = boundedjson.loads(payload)
        kind = doc["_type"]
        subjects = doc["subject"]
        predicate = doc.get("predicateType")
        matching = [s for s in subjects if (s.get("digest") or {}).get(algorithm) == hexpart]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise SignatureError("signed statement is not an in-toto statement") from None
    if kind not in STATEMENT_TYPES:
        raise SignatureError(f"signed statement has type {kind!r}")
    if predicate != predicate_type:
        what = "an attestation" if isinstance(predicate, str) else "a statement"
        raise SignatureError(f"signed statement is {what} of type {_short(predicate)}, not a signature "
                             f"({predicate_type})")
    if not matching:
        raise SignatureError(f"signed statement does not name {digest}")
    claims = matching[0].get("annotations") or {}
    return claims if isinstance(claims, dict) else {}


def _short(value: object) -> str:
    """A hostile predicate type, shown on one line and at most 100 characters."""
    text = one_line(repr(value))
    return text if len(text) <= 100 else text[:97] + "..."


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
