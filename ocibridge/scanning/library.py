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


#: opcodes of one file read before the scan stops: the library keeps each in memory (a real
#: checkpoint's pickle has thousands; a pickle of a billion one-byte opcodes would cost ~100 GB)
MAX_OPCODES = 1 << 23


class OpcodeBudget(Exception):
    """The pickle has more opcodes than :data:`MAX_OPCODES`."""


class _Counted:
    """``stream`` as the disassembler reads it, counting its one-byte reads (each opcode starts
    with one) and stopping it past the budget."""

    def __init__(self, stream: IO[bytes]):
        self._stream = stream
        self.ones = 0
        self.over = False

    def read(self, n: int = -1) -> bytes:
        if self.over:  # stopped: the rest is an end of file (the library reads on after an error)
            return b""
        if n == 1:
            self.ones += 1
            if self.ones > 2 * MAX_OPCODES:  # (an opcode's one-byte argument is read so too)
                self.over = True
                raise OpcodeBudget
        return self._stream.read(n)

    def readline(self, limit: int = -1) -> bytes:
        return b"" if self.over else self._stream.readline(limit)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._stream.seek(offset, whence)

    def tell(self) -> int:
        return self._stream.tell()


def pickle_findings(path: str, stream: IO[bytes], where: str = "", *, suspicious: str = "medium") -> list[Finding]:
    """What the library says of the pickle(s) in ``stream``: each dangerous global (a call that
    runs code or touches the system) ``critical``; each global it does not know to be safe at
    ``suspicious``. Globals it knows (torch's tensor rebuilders, numpy's arrays) say nothing. A
    pickle past the opcode budget is scanned in part, and says so (``high``: what follows is unseen)."""
    lib = _library()
    counted = _Counted(stream)
    result = lib.scan_pickle_bytes(counted, f"{path}:{where}" if where else path)
    found = []
    if counted.over:
        found.append(Finding(path, "high", f"pickle of more than {MAX_OPCODES} opcodes: scanned in part", where))
    for g in sorted(result.globals, key=lambda g: (g.module, g.name)):
        name = f"{g.module}.{g.name}"
        if g.safety == lib.SafetyLevel.Dangerous:
            found.append(Finding(path, "critical", f"pickle calls {name} (code execution on load)", where))
        elif g.safety == lib.SafetyLevel.Suspicious:
            found.append(Finding(path, suspicious, f"pickle imports {name} (not known to be safe)", where))
    return found
