"""Model scanning: every file judged by its content (pickles in any guise, NumPy object arrays,
Keras Lambda layers, ONNX external data paths, safetensors and GGUF headers), one report with a
verdict, attached to a stored model as a signed referrer and obeyed by the use policy
(docs/scanning.md). The pickle analysis is picklescan's (``pip install 'ocibridge[scan]'``).

Names load on first use: every check before use imports the clean-scan judge
(:mod:`.policy`), which reads reports and needs none of the scanners."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ocibridge.scanning.files import scan_contents, scan_directory, scan_files
    from ocibridge.scanning.library import ScannerMissing, scanner
    from ocibridge.scanning.report import (
        CLEAN,
        FLAGGED,
        PREDICATE_TYPE,
        REPORT_MEDIA_TYPE,
        FileScan,
        Finding,
        Scanner,
        ScanReport,
    )

_HOMES = {
    "scan_contents": "files", "scan_directory": "files", "scan_files": "files",
    "ScannerMissing": "library", "scanner": "library",
    "CLEAN": "report", "FLAGGED": "report", "PREDICATE_TYPE": "report", "REPORT_MEDIA_TYPE": "report",
    "FileScan": "report", "Finding": "report", "Scanner": "report", "ScanReport": "report",
}
__all__ = ["CLEAN", "FLAGGED", "PREDICATE_TYPE", "REPORT_MEDIA_TYPE", "FileScan", "Finding", "ScanReport", "Scanner",
           "ScannerMissing", "scan_contents", "scan_directory", "scan_files", "scanner"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
