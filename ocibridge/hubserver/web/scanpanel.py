"""The newest scan report of a model manifest (ocibridge/scanning/: a referrer, signed or not), as
its page shows it: the scanner, when, the verdict, each finding, and whether the report is signed
and by which key serve trusts it: first the keys that decide ``--scan quarantine``
(``--scan-verify-key``, serve's own key), then ``--verify-key`` (a report signed by another key is
anyone's word)."""

from __future__ import annotations

from dataclasses import dataclass

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.web.facts import DOCUMENT_MAX
from ocibridge.oci.models import Descriptor
from ocibridge.scanning.report import Finding
from ocibridge.scanning.stored import Keys, newest, stored_reports
from ocibridge.stores.base import Store


@dataclass(frozen=True)
class ScanPanel:
    """What the page prints of the newest report; ``problem`` alone when the registry could not
    list them (then nothing is claimed, not even "not scanned")."""

    digest: str = ""
    scanner: str = ""  # name and version, and the library underneath
    scanned_at: str = ""
    verdict: str = ""  # clean | flagged
    files: int = 0
    findings: tuple[Finding, ...] = ()
    signed: bool = False
    verified_with: str = ""  # the key it verified with, as the page names it; "" when none did
    checked_with: str = ""  # the keys it was checked against, as the page names them; "" when none
    problem: str = ""


def scan_panel(store: Store, model: Descriptor, scan_keys: Keys | None, verify_keys: Keys | None) -> ScanPanel | None:
    """The newest report attached to ``model``; None when none is. ``scan_keys``: the keys serve
    trusts for scan reports (``--scan quarantine``'s); ``verify_keys``: ``--verify-key``'s."""
    trusts = []
    if scan_keys:
        trusts.append((scan_keys, "a key serve trusts for scan reports ({})",
                       "the keys serve trusts for scan reports (" + ", ".join(name for name, _ in scan_keys) + ")"))
    if verify_keys:
        trusts.append((verify_keys, "serve’s --verify-key {}", "serve’s --verify-key keys"))
    try:
        found = newest(stored_reports(store, model, largest=DOCUMENT_MAX))
        if found is None:
            return None
        verified_with = ""
        for keys, named, _ in trusts if found.signed else ():
            vouched = {r.referrer.digest: r.verified_by for r in stored_reports(store, model, keys,
                                                                                largest=DOCUMENT_MAX)}
            by = vouched.get(found.referrer.digest)
            if by:
                verified_with = named.format(by)
                break
    except OcibridgeError as e:
        return ScanPanel(problem=str(e))
    report = found.report
    return ScanPanel(found.referrer.digest, report.scanner.describe(), report.scanned_at, report.verdict,
                     len(report.files), tuple(report.findings), found.signed, verified_with,
                     ", nor by ".join(checked for _, _, checked in trusts))
