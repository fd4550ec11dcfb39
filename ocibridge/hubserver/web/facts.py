"""What the pages say about one model, read from the registry the way serve reads it: its
ModelPack config (descriptor and config sections), its layers, and the referrers that sign or
attest it, classified by their descriptors alone (the registry's referrers list carries the
artifact type and the predicate annotation), so a catalog row costs one referrers request.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.repo.modelconfig import config_of as config_of  # the one reader of a config for serve
from ocibridge.oci.mediatypes import parse_layer_media_type
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.base import Store

#: bytes of a config or an evidence document read for a page (a ModelPack config is a few KiB)
DOCUMENT_MAX = 4 * 1024 * 1024
SIGNATURE_PREDICATES = ("https://sigstore.dev/cosign/sign/v1", "https://model_signing/signature/v1.0")
BUNDLE_PREFIX = "application/vnd.dev.sigstore.bundle"
PREDICATE_ANNOTATION = "dev.sigstore.bundle.predicateType"
NOTATION = "application/vnd.cncf.notary.signature"
CYCLONEDX = "application/vnd.cyclonedx+json"
IN_TOTO = "application/vnd.in-toto+json"
LICENSE_ANNOTATION = "org.opencontainers.image.licenses"


@dataclass(frozen=True)
class Evidence:
    """One referrer: a signature, an attestation (signed), or unsigned evidence (an SBOM, a
    provenance statement)."""

    kind: str  # signature | attestation | sbom | provenance | other
    digest: str
    artifact_type: str
    predicate_type: str | None
    signed: bool
    descriptor: Descriptor


def classify(referrers: list[Descriptor]) -> list[Evidence]:
    found = []
    for ref in referrers:
        kind, artifact = "other", ref.artifactType or ""
        predicate = (ref.annotations or {}).get(PREDICATE_ANNOTATION)
        signed = artifact.startswith(BUNDLE_PREFIX) or artifact == NOTATION
        if artifact == NOTATION or (artifact.startswith(BUNDLE_PREFIX) and predicate in SIGNATURE_PREDICATES):
            kind = "signature"
        elif artifact.startswith(BUNDLE_PREFIX):
            kind = "sbom" if predicate and "cyclonedx" in predicate.lower() else (
                "provenance" if predicate and "slsa" in predicate.lower() else "attestation")
        elif artifact == CYCLONEDX:
            kind = "sbom"
        elif artifact == IN_TOTO:
            kind = "provenance"
        found.append(Evidence(kind, ref.digest, artifact, predicate, signed, ref))
    return sorted(found, key=lambda e: (e.kind, e.digest))


def classic_signature(store: Store, subject: Descriptor) -> str | None:
    """cosign's classic signature tag beside ``subject`` (``sha256-HEX.sig``) when the store has it."""
    from ocibridge.signing.classic import signature_tag

    tag = signature_tag(subject.digest)
    try:
        store.resolve(tag)
    except OcibridgeError:
        return None
    return tag


def section(doc: dict[str, Any], name: str) -> dict[str, Any]:
    found = doc.get(name)
    return found if isinstance(found, dict) else {}


def shown(value: Any) -> str:
    """A config value as one line of text (lists joined, objects as compact JSON)."""
    if value is None or value == "" or value == [] or value == {}:
        return ""
    if isinstance(value, list):
        return ", ".join(shown(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(", ", ": "))
    return str(value)


def license_of(doc: dict[str, Any], manifest: Manifest) -> str:
    return shown(section(doc, "descriptor").get("licenses")) or (manifest.annotations or {}).get(LICENSE_ANNOTATION, "")


def layer_kind(layer: Descriptor | None) -> str:
    """What a layer holds (weight, config, doc, code, dataset), from its ModelPack media type."""
    if layer is None:
        return "file in a tar layer"
    found = parse_layer_media_type(layer.mediaType)
    if found is None:
        return "file"
    variant = f" ({found.variant.value})" if found.variant.value and found.variant.value != "raw" else ""
    return f"{found.kind.value}{variant}"


def statement_of(store: Store, evidence: Evidence) -> dict[str, Any] | None:
    """The document an evidence referrer carries: an unsigned one's layer, a signed one's DSSE
    payload (not verified here: the page says what the policy verified, separately)."""
    try:
        node = parse_manifest_bytes(store.fetch_bytes(evidence.descriptor), evidence.descriptor.mediaType)
        if not isinstance(node, Manifest) or len(node.layers) != 1:
            return None
        layer = node.layers[0]
        if layer.size > DOCUMENT_MAX:
            return None
        doc = boundedjson.loads(store.fetch_bytes(layer))
        if evidence.signed and isinstance(doc, dict):
            payload = (doc.get("dsseEnvelope") or {}).get("payload")
            doc = boundedjson.loads(base64.b64decode(payload)) if isinstance(payload, str) else None
    except (OcibridgeError, ValueError, RecursionError, TypeError, KeyError, AttributeError):
        return None
    return doc if isinstance(doc, dict) else None
