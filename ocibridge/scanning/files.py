"""Scanning a set of files: a directory on disk, or files by name with their contents (a stored
artifact's layers), into one :class:`ScanReport`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path

from ocibridge.lazyread.tensorfile import RangeReadable
from ocibridge.scanning.content import Closable, LocalFile
from ocibridge.scanning.formats import scan_content
from ocibridge.scanning.library import scanner
from ocibridge.scanning.report import FileScan, ScanReport

#: a file's content, opened when its turn comes (and closed after, when it has ``close``)
Opener = Callable[[], RangeReadable]


def scan_contents(files: Iterable[tuple[str, Opener]], *, subject: str = "") -> ScanReport:
    """Scan each ``(path, opener)`` by its content; ``subject``: the manifest digest they are of."""
    who = scanner()  # (the library looked for before the first file is opened)
    scanned = []
    for path, opener in files:
        content = opener()
        try:
            kind, found = scan_content(path, content)
            scanned.append(FileScan(path, content.size, kind, tuple(found)))
        finally:
            if isinstance(content, Closable):
                content.close()
    return ScanReport(who, tuple(sorted(scanned, key=lambda f: f.path)), now(), subject)


def scan_directory(directory: str | os.PathLike[str]) -> ScanReport:
    """Scan every regular file under ``directory`` (paths relative to it, with ``/``); links
    are not followed (what a push of it would take is what it points at: scanned there)."""
    root = Path(directory)
    if root.is_file():
        return scan_files([(root.name, root)])
    found = []
    for base, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            full = Path(base) / name
            if full.is_file() and not full.is_symlink():
                found.append((full.relative_to(root).as_posix(), full))
    return scan_files(found)


def scan_files(files: Iterable[tuple[str, str | os.PathLike[str]]]) -> ScanReport:
    """Scan local files, each named in the report by the path given first."""
    return scan_contents((path, _opener(local)) for path, local in files)


def _opener(local: str | os.PathLike[str]) -> Opener:
    return lambda: LocalFile(local)


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
