"""Removing what no commit came for: staged uploads, parts and pins untouched for the staging's
expiry, and the chunk tables whose file went."""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Container
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote

_HEX64 = re.compile(r"[0-9a-f]{64}")


class StagingFolders(Protocol):
    """The folders of a staging (:class:`.staging.Staging`) and how long an entry may lie untouched."""

    tmp: Path
    files: Path
    tables: Path
    held: Path
    parts: Path
    pins: Path
    released: Path
    expiry: float


def clean(staging: StagingFolders, uploading: Container[str], now: float) -> int:
    """What :meth:`.staging.Staging.clean` removes at ``now`` (under its lock; pins of the
    repositories ``uploading`` kept); how many went."""
    removed = 0
    for held in staging.pins.iterdir() if staging.pins.is_dir() else ():
        with contextlib.suppress(OSError):
            for pin in held.iterdir():
                busy = unquote(pin.name.rpartition(".")[0]) in uploading
                if now - pin.lstat().st_mtime > staging.expiry and not busy:
                    pin.unlink()
            if not any(held.iterdir()):
                held.rmdir()
    for top in (staging.tmp, staging.files, staging.held, staging.parts, staging.released):
        if not top.is_dir():
            continue
        for entry in top.iterdir():
            with contextlib.suppress(OSError):
                if now - _touched(entry) > staging.expiry and not (staging.pins / entry.name).is_dir():
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry)
                    else:
                        entry.unlink()
                    removed += 1
    for table in staging.tables.iterdir() if staging.tables.is_dir() else ():
        with contextlib.suppress(OSError):  # its file went (expired, committed), or a write died
            if _HEX64.fullmatch(table.name) and not (staging.files / table.name).exists() \
                    and not (staging.held / table.name).exists() \
                    or not _HEX64.fullmatch(table.name) and now - table.lstat().st_mtime > staging.expiry:
                table.unlink()
    return removed


def _touched(entry: Path) -> float:
    """When ``entry`` (a file, or a directory of parts: its newest) was last written or touched."""
    st = entry.lstat()
    newest = st.st_mtime
    if entry.is_dir() and not entry.is_symlink():
        for inner in entry.iterdir():
            with contextlib.suppress(OSError):
                newest = max(newest, inner.lstat().st_mtime)
    return newest
