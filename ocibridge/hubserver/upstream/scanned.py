"""The proxy's content scan (``--upstream-scan refuse``, or serve's ``--scan refuse|quarantine``: a
proxied model is scanned as a pushed one): each fetched file, once whole and checked
and before its last byte reaches a reader, is scanned by ocibridge's scanner (:mod:`ocibridge.scanning`:
pickles in any guise, NumPy object arrays, Keras Lambda layers, ONNX external data paths, lying
safetensors and GGUF headers). A flagged file refuses its commit as the pickle rule does: nothing
of it reaches the registry, the audit line and every later read name the file, the finding and the
scanner. A clean commit's report is attached to its manifest before its tags move."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ocibridge.hubserver.upstream.errors import UpstreamRefused

if TYPE_CHECKING:
    from ocibridge.scanning.report import FileScan, Scanner, ScanReport

FLAG = "--upstream-scan"


class ScanFlagged(UpstreamRefused):
    """A fetched file the scanner flags: its commit is refused, nothing of it lands."""


class CommitScan:
    """One fetched commit's scan, file by file as each is whole (any order, any thread)."""

    def __init__(self, repo_id: str, commit: str, flag: str = FLAG):
        self.repo_id, self.commit = repo_id, commit
        self.flag = flag  # the flag that asked for the scan, named in a refusal
        self._lock = threading.Lock()
        self._files: dict[str, FileScan] = {}
        self._scanner: Scanner | None = None

    def judge(self, path: str, local: Path) -> ScanFlagged | None:
        """The refusal of the file at ``local`` (``path`` in the commit) when the scanner flags it."""
        from ocibridge.scanning.files import scan_files

        report = scan_files([(path, local)])
        with self._lock:
            self._scanner = report.scanner
            self._files.update((f.path, f) for f in report.files)
        if not report.flagged:
            return None
        return ScanFlagged(f"{self.repo_id}@{self.commit}: not fetched from the upstream: {report.refusal()} "
                           f"(refused by {self.flag})", self.flag)

    def report(self, subject: str) -> ScanReport | None:
        """The commit's report, every file scanned (None: no file was)."""
        from ocibridge.scanning.files import now
        from ocibridge.scanning.report import ScanReport

        with self._lock:
            if self._scanner is None:
                return None
            files = tuple(sorted(self._files.values(), key=lambda f: f.path))
            return ScanReport(self._scanner, files, now(), subject)
