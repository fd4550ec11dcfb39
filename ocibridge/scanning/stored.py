"""Scan reports as referrers of the model manifest they judge: signed as the project's other
evidence is (an in-toto attestation of predicate type ``https://ocibridge.dev/scan/v1`` in a
sigstore bundle) when a key is given, else attached as a plain document
(``application/vnd.ocibridge.scan.v1+json``). Of several, the newest (``scannedAt``) counts: a
rescan by a later scanner adds one, it never rewrites another.

Every reader of reports (``scan``, ``inspect``, a use policy, ``serve --scan quarantine``, the
model page's Scan panel) reads them within one bound, :data:`REPORT_MAX`: a report past it is
skipped unread by all alike, so the page never names another report than the quarantine follows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ocibridge.core import boundedjson
from ocibridge.core.limits import read_capped
from ocibridge.errors import SignatureError
from ocibridge.oci.digest import verify_bytes
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.scanning.report import PREDICATE_TYPE, REPORT_MEDIA_TYPE, ScanReport, report_from_dict
from ocibridge.stores.base import MAX_MANIFEST_BYTES, Store, WritableStore, referrers_read

if TYPE_CHECKING:
    from ocibridge.signing import keys

Keys = list[tuple[str, "keys.PublicKey"]]

#: bytes of a scan report's document read (larger: skipped unread, by every reader alike). A
#: report lists every file scanned, and signed its statement is base64 in a bundle: a model of
#: some 30,000 files passes the 4 MiB a manifest or a page's document is read within.
REPORT_MAX = 16 * 1024 * 1024


@dataclass(frozen=True)
class StoredReport:
    """A report found beside a manifest: its referrer, whether it is signed, and by which of the
    keys asked it verified (None: not verified, or no key asked)."""

    referrer: Descriptor
    report: ScanReport
    signed: bool
    verified_by: str | None = None
    size: int = 0  # bytes of its document (a signed one's bundle): a page may be too small to show it all

    def as_dict(self) -> dict[str, object]:
        return {"digest": self.referrer.digest, "verdict": self.report.verdict, "signed": self.signed,
                "scannedAt": self.report.scanned_at, "scanner": self.report.scanner.describe(),
                **({"verifiedBy": self.verified_by} if self.verified_by else {})}


def attach_report(store: WritableStore, subject: Descriptor, report: ScanReport, key: keys.PrivateKey | None = None,
                  identity: str = "") -> tuple[Descriptor, bool]:
    """Attach ``report`` to ``subject``: (the referrer, whether it was new)."""
    from ocibridge.signing.attest import attach_document, attest

    if key is not None:
        return attest(store, subject, key, identity or store.describe(), PREDICATE_TYPE, report.as_dict())
    data = (json.dumps(report.as_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    return attach_document(store, subject, REPORT_MEDIA_TYPE, data)


def stored_reports(store: Store, subject: Descriptor, keys: Keys | None = None) -> list[StoredReport]:
    """Every scan report of ``subject`` within :data:`REPORT_MAX`, oldest first. With ``keys``,
    only signed reports whose signature verifies with one of them and whose statement names
    ``subject`` (the others are anyone's word); without, every report, read unverified (what
    ``inspect`` lists)."""
    from ocibridge.signing.sigstorebundle import PREDICATE_ANNOTATION, is_bundle_type

    found = []
    held = referrers_read(store, subject)
    for ref in held:
        signed = is_bundle_type(ref.artifactType)
        if not signed and ref.artifactType != REPORT_MEDIA_TYPE:
            continue
        if keys is not None and not signed:
            continue
        node = parse_manifest_bytes(held.manifest(ref), ref.mediaType)
        if not isinstance(node, Manifest) or len(node.layers) != 1:
            continue
        if signed and (node.annotations or {}).get(PREDICATE_ANNOTATION) != PREDICATE_TYPE:
            continue
        if node.layers[0].size > REPORT_MAX:
            continue
        data = _document(store, node.layers[0])
        try:
            doc, signer = _signed_report(data, subject, keys) if signed else (boundedjson.loads(data), None)
            report = report_from_dict(doc)
        except (ValueError, SignatureError):
            continue  # not a report of this subject, or not signed by a key asked: not counted
        if keys is not None and signer is None:
            continue
        found.append(StoredReport(ref, report, signed, signer, len(data)))
    return sorted(found, key=lambda r: (r.report.scanned_at, r.referrer.digest))


def _document(store: Store, layer: Descriptor) -> bytes:
    """A report's document whole, checked against its digest: past a manifest's bound (which
    ``fetch_bytes`` refuses) it is read through ``open_blob``, no further than it says it is."""
    if layer.size <= MAX_MANIFEST_BYTES:
        return store.fetch_bytes(layer)
    with store.open_blob(layer) as reader:
        data = read_capped(reader, layer.size)
    return verify_bytes(data, layer.digest, layer.size)


def newest(reports: list[StoredReport]) -> StoredReport | None:
    return reports[-1] if reports else None


def newest_summary(store: Store, subject: Descriptor) -> dict[str, object] | None:
    """What ``inspect`` shows of the newest report (unverified): its verdict, when, by which
    scanner, signed or not, and its first flagged finding."""
    found = newest(stored_reports(store, subject))
    if found is None:
        return None
    flagged = found.report.flagged
    return {**found.as_dict(), **({"finding": flagged[0].line(), "flaggedFindings": len(flagged)} if flagged else {})}


def _signed_report(data: bytes, subject: Descriptor, keys: Keys | None) -> tuple[object, str | None]:
    """The predicate of a signed report, and the name of the key it verified with (None when no
    key was asked: read unverified)."""
    import base64

    from ocibridge.signing.sigstorebundle import parse_bundle, statement_claims, verify_envelope

    content = parse_bundle(data)
    if content.envelope is None:
        raise SignatureError("not an attestation")
    signer = None
    if keys is None:
        payload = base64.b64decode(content.envelope.get("payload", ""), validate=True)
    else:
        for name, key in keys:
            try:
                payload = verify_envelope(content.envelope, key)
            except SignatureError:
                continue
            signer = name
            break
        else:
            raise SignatureError("signed by none of the keys asked")
    statement_claims(payload, subject.digest, PREDICATE_TYPE)  # this subject, this predicate type
    doc = boundedjson.loads(payload)
    return doc.get("predicate"), signer
