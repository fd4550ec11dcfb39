"""Model scanning: every file judged by its content (pickles in any guise, NumPy object arrays,
Keras Lambda layers, ONNX external data paths, safetensors and GGUF headers), one report with a
verdict, attached to a stored model as a signed referrer and obeyed by the use policy
(docs/scanning.md). The pickle analysis is picklescan's (``pip install 'ocibridge[scan]'``)."""

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

__all__ = ["CLEAN", "FLAGGED", "PREDICATE_TYPE", "REPORT_MEDIA_TYPE", "FileScan", "Finding", "ScanReport", "Scanner",
           "ScannerMissing", "scan_contents", "scan_directory", "scan_files", "scanner"]
