"""What a scan says: per file, its findings (each with a severity), and one verdict for the whole.

The report is the predicate of the scan attestation (``PREDICATE_TYPE``), so its JSON form is a
contract: readers of older reports (a rescan's newer one beside them) read both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PREDICATE_TYPE = "https://ocibridge.dev/scan/v1"
#: the ``artifactType`` of a report attached unsigned (signed ones are sigstore bundles)
REPORT_MEDIA_TYPE = "application/vnd.ocibridge.scan.v1+json"

SEVERITIES = ("info", "low", "medium", "high", "critical")
#: findings from this severity up make the verdict ``flagged``
FLAGGING = "high"
CLEAN, FLAGGED = "clean", "flagged"
#: a flagged report its owners released from serve's quarantine (the findings kept, signed by the scan key)
RELEASED = "released"


@dataclass(frozen=True)
class Finding:
    """One thing found in ``path``: ``what`` in words, ``severity``, and ``where`` inside the
    file (a member of a zip, a tensor, a layer), empty for the file itself."""

    path: str
    severity: str
    what: str
    where: str = ""

    @property
    def flags(self) -> bool:
        return SEVERITIES.index(self.severity) >= SEVERITIES.index(FLAGGING)

    def line(self) -> str:
        inside = f" ({self.where})" if self.where else ""
        return f"{self.path}{inside}: {self.severity}: {self.what}"

    def as_dict(self) -> dict[str, Any]:
        out = {"severity": self.severity, "finding": self.what}
        if self.where:
            out["where"] = self.where
        return out


@dataclass(frozen=True)
class FileScan:
    """One file: its path in the model, its size, the format its content showed, its findings."""

    path: str
    size: int
    format: str
    findings: tuple[Finding, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "format": self.format,
                "findings": [f.as_dict() for f in self.findings]}


@dataclass(frozen=True)
class Scanner:
    """Who scanned: ocibridge's scanner, its version, and the pickle library underneath."""

    name: str
    version: str
    library: str
    library_version: str

    def describe(self) -> str:
        return f"{self.name} {self.version} ({self.library} {self.library_version})"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version,
                "library": {"name": self.library, "version": self.library_version}}


@dataclass(frozen=True)
class ScanReport:
    """A scan of a set of files: ``verdict`` is ``flagged`` when any finding is ``high`` or
    ``critical``; ``scanned_at`` (RFC 3339, UTC) orders reports of one model: the newest counts."""

    scanner: Scanner
    files: tuple[FileScan, ...]
    scanned_at: str = ""
    subject: str = ""  # the manifest digest scanned, when it was a stored artifact
    released: bool = False  # its owners let this flagged model out of quarantine (``scan --release``)

    @property
    def findings(self) -> list[Finding]:
        return [f for file in self.files for f in file.findings]

    @property
    def flagged(self) -> list[Finding]:
        return [f for f in self.findings if f.flags]

    @property
    def verdict(self) -> str:
        return RELEASED if self.released else FLAGGED if self.flagged else CLEAN

    def refusal(self) -> str:
        """The first flagged finding as a refusal names it: file, finding, scanner."""
        found = self.flagged
        if not found:
            return ""
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        return f"{found[0].line()}{more} [scanner: {self.scanner.describe()}]"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scanner": self.scanner.as_dict(), "verdict": self.verdict,
                               "files": [f.as_dict() for f in self.files]}
        if self.scanned_at:
            out["scannedAt"] = self.scanned_at
        if self.subject:
            out["subject"] = self.subject
        return out


def report_from_dict(doc: Any) -> ScanReport:
    """A report read back from its JSON (a referrer's predicate); ValueError when it is not one."""
    try:
        s = doc["scanner"]
        scanner = Scanner(str(s["name"]), str(s["version"]), str(s["library"]["name"]),
                          str(s["library"]["version"]))
        files = []
        for item in doc["files"]:
            path = str(item["path"])
            found = tuple(Finding(path, _severity(f["severity"]), str(f["finding"]), str(f.get("where", "")))
                          for f in item["findings"])
            files.append(FileScan(path, int(item["size"]), str(item["format"]), found))
        report = ScanReport(scanner, tuple(files), str(doc.get("scannedAt", "")), str(doc.get("subject", "")),
                            doc.get("verdict") == RELEASED)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"not a scan report: {e}") from None
    if doc.get("verdict") != report.verdict:
        raise ValueError(f"a scan report whose verdict {doc.get('verdict')!r} does not follow from its findings")
    return report


def _severity(value: Any) -> str:
    if value not in SEVERITIES:
        raise ValueError(f"unknown severity {value!r}")
    return str(value)
