"""The pickle library underneath: picklescan (the scanner the Hugging Face Hub runs on every
upload), asked about one pickle stream at a time, whatever the file is named; its verdicts on
each imported global become findings. An optional extra: without it, one line naming it."""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import IO, Any

from ocibridge.errors import OcibridgeError
from ocibridge.scanning.report import Finding, Scanner
from ocibridge.version import __version__

NAME = "ocibridge-scan"
LIBRARY = "picklescan"
EXTRA = "scan"


class ScannerMissing(OcibridgeError):
    """The scanner library is not installed."""


@lru_cache(maxsize=1)
def _library() -> Any:
    try:
        import picklescan.scanner as found
    except ImportError:
        raise ScannerMissing(f"scanning needs {LIBRARY}: pip install 'ocibridge[{EXTRA}]'") from None
    logging.getLogger("picklescan").disabled = True  # its warnings are our findings, not log lines
    return found


def scanner() -> Scanner:
    """Who scans (raises :class:`ScannerMissing` without the library: before anything is read)."""
    from importlib.metadata import PackageNotFoundError, version

    _library()
    try:
        found = version(LIBRARY)
    except PackageNotFoundError:
        found = "unknown"
    return Scanner(NAME, __version__, LIBRARY, found)


def pickle_findings(path: str, stream: IO[bytes], where: str = "", *, suspicious: str = "medium") -> list[Finding]:
    """What the library says of the pickle(s) in ``stream``: each dangerous global (a call that
    runs code or touches the system) ``critical``; each global it does not know to be safe at
    ``suspicious``. Globals it knows (torch's tensor rebuilders, numpy's arrays) say nothing."""
    lib = _library()
    result = lib.scan_pickle_bytes(stream, f"{path}:{where}" if where else path)
    found = []
    for g in sorted(result.globals, key=lambda g: (g.module, g.name)):
        name = f"{g.module}.{g.name}"
        if g.safety == lib.SafetyLevel.Dangerous:
            found.append(Finding(path, "critical", f"pickle calls {name} (code execution on load)", where))
        elif g.safety == lib.SafetyLevel.Suspicious:
            found.append(Finding(path, suspicious, f"pickle imports {name} (not known to be safe)", where))
    return found
