"""Attestations: in-toto statements about a manifest, signed as cosign v3 signs them, attached
as OCI referrers; and evidence documents attached unsigned.

An attestation is the cosign bundle form with another predicate type: a sigstore bundle v0.3
whose DSSE envelope (``application/vnd.in-toto+json``) holds an in-toto Statement v1 naming the
manifest digest as its subject, pushed as a referrer of that manifest with
``dev.sigstore.bundle.predicateType`` = the predicate type (what ``cosign attest
--new-bundle-format`` writes). Signed with the keys ``sign --key`` takes (RFC 6979: attesting
the same statement twice writes nothing). Being referrers, attestations travel wherever
referrers do: ``copy -r``, mirror jobs, ``save``/``load``.

An attestation covers its subject only (signing/coverage.py): what its predicate says about
that digest. It is never a signature (signing/sigstorebundle.py ``statement_claims``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ocibridge.errors import UsageError
from ocibridge.oci.digest import split_digest
from ocibridge.oci.empty import empty_descriptor
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.signing.sigstorebundle import (
    BUNDLE_MEDIA_TYPE,
    PREDICATE_ANNOTATION,
    SIGN_PREDICATE_TYPE,
    STATEMENT_V1,
    is_bundle_type,
)
from ocibridge.stores.base import HeldReferrers, Store, WritableStore, referrers_read
from ocibridge.transfer.writer import Blob, write_artifact

if TYPE_CHECKING:
    from ocibridge.signing import keys

CYCLONEDX = "https://cyclonedx.org/bom"
SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1"
#: cosign's short names for predicate types (``cosign attest --type``), as ``--attestation-type`` takes them
TYPE_NAMES = {
    "cyclonedx": CYCLONEDX,
    "slsaprovenance1": SLSA_PROVENANCE_V1,
    "slsaprovenance": "https://slsa.dev/provenance/v0.2",
    "spdxjson": "https://spdx.dev/Document",
    "spdx": "https://spdx.dev/Document",
    "vuln": "https://cosign.sigstore.dev/attestation/vuln/v1",
    "openvex": "https://openvex.dev/ns",
}


def predicate_type_of(name: str) -> str:
    """A predicate type by cosign's short name, or the URI as given."""
    if name in TYPE_NAMES:
        return TYPE_NAMES[name]
    if "://" not in name:
        raise UsageError(f"attestation type {name!r}: a URI or one of {', '.join(sorted(TYPE_NAMES))}")
    if name == SIGN_PREDICATE_TYPE:
        raise UsageError(f"{name} is cosign's signature, not an attestation: use verify without "
                         "--attestation-type")
    return name


def statement(name: str, digest: str, predicate_type: str, predicate: dict[str, Any]) -> bytes:
    """An in-toto Statement v1 about ``name`` at ``digest`` (compact, keys sorted: the same
    predicate gives the same bytes)."""
    algorithm, hexpart = split_digest(digest)
    doc = {"_type": STATEMENT_V1, "subject": [{"name": name, "digest": {algorithm: hexpart}}],
           "predicateType": predicate_type, "predicate": predicate}
    return json.dumps(doc, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def attest(store: WritableStore, subject: Descriptor, key: keys.PrivateKey, identity: str,
           predicate_type: str, predicate: dict[str, Any]) -> tuple[Descriptor, bool]:
    """Sign a statement of ``predicate_type`` about ``subject`` and attach it as a referrer:
    (the referrer manifest, whether it was new)."""
    from ocibridge.signing.attach import attach_bundle
    from ocibridge.signing.sigstorebundle import make_bundle

    bundle = make_bundle(key, statement(identity, subject.digest, predicate_type, predicate))
    return attach_bundle(store, subject, bundle, predicate_type)


def attach_document(store: WritableStore, subject: Descriptor, media_type: str, data: bytes) -> tuple[Descriptor, bool]:
    """``data`` as the one layer of a referrer of ``subject`` whose ``artifactType`` is
    ``media_type`` (unsigned evidence, as ``oras attach`` writes it): (referrer, whether new)."""
    layer = Descriptor.for_bytes(media_type, data)
    manifest = Manifest(mediaType=OCI_MANIFEST, artifactType=media_type, config=empty_descriptor(), layers=[layer],
                        subject=Descriptor(mediaType=subject.mediaType, digest=subject.digest, size=subject.size))
    body = manifest.to_json_bytes()
    desc = Descriptor.for_bytes(OCI_MANIFEST, body)
    sent = write_artifact(store, desc, body, [Blob.empty(), Blob.of_bytes(layer, data)])
    return desc, sent.manifests_copied > 0


@dataclass
class Attestation:
    """A signed attestation referrer of a manifest, as listed (not verified)."""

    referrer: Descriptor
    predicate_type: str
    bundle: bytes

    def as_dict(self) -> dict[str, Any]:
        return {"digest": self.referrer.digest, "predicateType": self.predicate_type}


def find_attestations(store: Store, subject: Descriptor, held: HeldReferrers | None = None) -> list[Attestation]:
    """Every bundle referrer of ``subject`` whose predicate type is not a signature's (OMS
    model signatures included: they are signatures of another form), unverified; ``held``, the
    referrers as the caller listed them (else listed here)."""
    from ocibridge.signing.oms import is_oms_predicate

    found = []
    held = held if held is not None else referrers_read(store, subject)
    for ref in held:
        if not is_bundle_type(ref.artifactType):
            continue
        node = parse_manifest_bytes(held.manifest(ref), ref.mediaType)
        if not isinstance(node, Manifest) or len(node.layers) != 1:
            continue
        kind = (node.annotations or {}).get(PREDICATE_ANNOTATION, "")
        if kind == SIGN_PREDICATE_TYPE or is_oms_predicate(kind) or not kind:
            continue
        found.append(Attestation(ref, kind, store.fetch_bytes(node.layers[0])))
    return sorted(found, key=lambda a: (a.predicate_type, a.referrer.digest))


EVIDENCE_TYPES = {"application/vnd.cyclonedx+json": CYCLONEDX, "application/vnd.in-toto+json": "in-toto statement",
                  "application/vnd.ocibridge.scan.v1+json": "https://ocibridge.dev/scan/v1"}  # (scanning/report.py)


def list_evidence(store: Store, subject: Descriptor) -> list[dict[str, Any]]:
    """What ``inspect`` lists: each attestation referrer (its claimed predicate type: nothing is
    verified here) and each unsigned evidence referrer (a BOM, a provenance statement)."""
    from ocibridge.signing.oms import is_oms_predicate

    out = []
    held = referrers_read(store, subject)
    for ref in held:
        if is_bundle_type(ref.artifactType):
            node = parse_manifest_bytes(held.manifest(ref), ref.mediaType)
            kind = (node.annotations or {}).get(PREDICATE_ANNOTATION, "") if isinstance(node, Manifest) else ""
            if kind and kind != SIGN_PREDICATE_TYPE and not is_oms_predicate(kind):
                out.append({"digest": ref.digest, "predicateType": kind, "signed": True})
        elif ref.artifactType in EVIDENCE_TYPES:
            out.append({"digest": ref.digest, "predicateType": EVIDENCE_TYPES[ref.artifactType], "signed": False})
    return sorted(out, key=lambda e: (e["predicateType"], e["digest"]))


__all__ = ["BUNDLE_MEDIA_TYPE", "CYCLONEDX", "SLSA_PROVENANCE_V1", "attach_document", "attest",
           "find_attestations", "list_evidence", "predicate_type_of", "statement"]
