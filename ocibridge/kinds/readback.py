"""Writers as strict as readers: an archive ocibridge writes must pass ocibridge's own reader.

An artifact can hold what no reader would accept back (a chain of links that leaves ``model/``,
a name that is both a file and a directory, a manifest naming files that are not there). The
exporters write to a temporary file beside the destination; this check reads that file with
the format's reader before it is renamed into place, so nothing is published that a later
``push`` of the same file would refuse.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ocibridge.errors import OcibridgeError, SourceError, UnsafePath


def must_read_back(written: Path, final: Path, read: Callable[[Path], object], kind: str) -> None:
    """Refuse ``final`` (nothing is renamed) unless ``read(written)`` accepts the file."""
    try:
        read(written)
    except OcibridgeError as error:
        reason = str(error).removeprefix(f"{written}: ")
        message = f"refusing to write {final}: ocibridge's own {kind} reader would refuse it: {reason}"
        raise (UnsafePath if isinstance(error, UnsafePath) else SourceError)(message) from None
