"""The newest scan report of a model manifest (ocibridge/scanning/: a referrer, signed or not), as
its page shows it: the scanner, when, the verdict, each finding, and whether the report is signed
and verified by serve's ``--verify-key`` keys (a report signed by another key is anyone's word)."""

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
    verified_by: str = ""  # the --verify-key key it verified with, "" when none did or none was given
    problem: str = ""


def scan_panel(store: Store, model: Descriptor, keys: Keys | None) -> ScanPanel | None:
    """The newest report attached to ``model``; None when none is."""
    try:
        found = newest(stored_reports(store, model, largest=DOCUMENT_MAX))
        if found is None:
            return None
        verified_by = ""
        if keys and found.signed:
            vouched = {r.referrer.digest: r.verified_by for r in stored_reports(store, model, keys,
                                                                                largest=DOCUMENT_MAX)}
            verified_by = vouched.get(found.referrer.digest) or ""
    except OcibridgeError as e:
        return ScanPanel(problem=str(e))
    report = found.report
    return ScanPanel(found.referrer.digest, report.scanner.describe(), report.scanned_at, report.verdict,
                     len(report.files), tuple(report.findings), found.signed, verified_by)
