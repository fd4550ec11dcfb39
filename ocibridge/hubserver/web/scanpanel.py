"""The newest scan report of a model manifest (ocibridge/scanning/: a referrer, signed or not), as
its page shows it: the scanner, when, the verdict, each finding, and whether the report is signed
and by which key serve trusts it: first the keys that decide ``--scan quarantine``
(``--scan-verify-key``, serve's own key), then ``--verify-key`` (a report signed by another key is
anyone's word). Under ``--scan quarantine`` the panel shows the report the quarantine follows
instead (so the page never contradicts what serve does), and says how many newer ones do not count.
Reports are read as the quarantine reads them (``stored.REPORT_MAX``); one larger than the page
renders (``DOCUMENT_MAX``) is still named, its findings left out, saying so."""

from __future__ import annotations

from dataclasses import dataclass

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.repo.quarantined import deciding_report
from ocibridge.hubserver.web.facts import DOCUMENT_MAX
from ocibridge.oci.models import Descriptor
from ocibridge.scanning.report import Finding
from ocibridge.scanning.stored import Keys, StoredReport, newest, stored_reports
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
    decides: str = ""  # under --scan quarantine, how the report shown decides it (lead); "": it does not
    passed_over: str = ""  # the newer reports that do not count, in words; "" when none
    withheld: str = ""  # why its findings are not shown (its size), in words; "" when they are


def _decides(trusted: bool, newer: tuple[StoredReport, ...]) -> tuple[str, str]:
    """The panel's lead for the report ``--scan quarantine`` follows, and its line on the newer
    reports it passes over (unsigned, or signed by a key serve does not trust)."""
    if trusted:
        lead = ("The scan report --scan quarantine follows (the newest signed by a key serve trusts)" if newer
                else "The newest scan report, the one --scan quarantine follows")
    else:
        lead = ("The scan report --scan quarantine follows (none is signed by a key serve trusts: the newest "
                "flagged one holds the model)" if newer else "The newest scan report, the one --scan quarantine "
                "follows (none is signed by a key serve trusts: a flagged one holds the model)")
    if not newer:
        return lead, ""
    unsigned = sum(1 for r in newer if not r.signed)
    why = [f"{unsigned} unsigned"] if unsigned else []
    if len(newer) > unsigned:
        why.append(f"{len(newer) - unsigned} signed by a key serve does not trust")
    counted = f"{len(newer)} newer report{' does' if len(newer) == 1 else 's do'} not count ({', '.join(why)})"
    return lead, f"{counted}: only a report signed by a key serve trusts decides --scan quarantine."


def scan_panel(store: Store, model: Descriptor, scan_keys: Keys | None, verify_keys: Keys | None) -> ScanPanel | None:
    """The newest report attached to ``model`` (under ``--scan quarantine``, the one it follows);
    None when none is. ``scan_keys``: the keys serve
    trusts for scan reports (``--scan quarantine``'s); ``verify_keys``: ``--verify-key``'s."""
    trusts = []
    if scan_keys:
        trusts.append((scan_keys, "a key serve trusts for scan reports ({})",
                       "the keys serve trusts for scan reports (" + ", ".join(name for name, _ in scan_keys) + ")"))
    if verify_keys:
        trusts.append((verify_keys, "serve’s --verify-key {}", "serve’s --verify-key keys"))
    decides = passed_over = verified_with = ""
    try:
        deciding = deciding_report(store, model, tuple(scan_keys)) if scan_keys else None
        if deciding is not None and deciding.report is not None:
            found: StoredReport | None = deciding.report
            decides, passed_over = _decides(deciding.trusted, deciding.passed_over)
            if deciding.trusted and deciding.report.verified_by:  # read with the keys --scan quarantine trusts
                verified_with = trusts[0][1].format(deciding.report.verified_by)
        else:
            found = newest(stored_reports(store, model))
        if found is None:
            return None
        for keys, named, _ in trusts if found.signed and not verified_with else ():
            vouched = {r.referrer.digest: r.verified_by for r in stored_reports(store, model, keys)}
            by = vouched.get(found.referrer.digest)
            if by:
                verified_with = named.format(by)
                break
    except OcibridgeError as e:
        return ScanPanel(problem=str(e))
    report, withheld = found.report, _withheld(found)
    return ScanPanel(found.referrer.digest, report.scanner.describe(), report.scanned_at, report.verdict,
                     len(report.files), () if withheld else tuple(report.findings), found.signed, verified_with,
                     ", nor by ".join(checked for _, _, checked in trusts), "", decides, passed_over, withheld)


def _withheld(found: StoredReport) -> str:
    """Why the page leaves out a report's findings: its document is larger than a page renders
    (the report is still the one named, as the quarantine reads it)."""
    if found.size <= DOCUMENT_MAX:
        return ""
    return (f"Its findings are not shown: the report is {found.size:,} bytes, more than the {DOCUMENT_MAX:,} "
            "this page renders (ocibridge.scan_reports(REF) reads it whole).")
