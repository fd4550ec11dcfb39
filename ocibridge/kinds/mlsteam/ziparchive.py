"""Hostile-until-checked zip reading: entry checks up front, bounded streaming readers.

Checked before anything is read: the central directory parses (a truncated file does not),
names are safe relative paths, no duplicates, no file that is also a directory, no symlinks,
no encrypted entries, supported compression only, no overlapping entries (the trick behind
non-recursive zip bombs), declared sizes within the ratio and total limits. Checked while
streaming: the bytes that come out stay within the declared size and the ratio limit, and the
CRC matches (zipfile checks it at EOF); every failure is a :class:`SourceError`.
"""

from __future__ import annotations

import lzma
import stat
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ocibridge.core.closing import ClosesOnExit
from ocibridge.core.fsutil import is_root_entry, safe_relpath
from ocibridge.errors import SourceError, UnsafePath

#: Compression methods Python's zipfile decompresses everywhere we run.
SUPPORTED_METHODS = {
    zipfile.ZIP_STORED: "stored",
    zipfile.ZIP_DEFLATED: "deflate",
    zipfile.ZIP_BZIP2: "bzip2",
    zipfile.ZIP_LZMA: "lzma",
}
#: What zipfile and its decompressors raise on damaged entry data.
_DATA_ERRORS = (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error, lzma.LZMAError)
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")


@dataclass(frozen=True)
class ZipLimits:
    """Bomb limits. Deflate cannot exceed about 1032:1, so the default ratio only trips on
    other methods or forged headers; the total caps what an archive may claim to hold."""

    max_entries: int = 100_000
    max_ratio: int = 1100
    ratio_floor: int = 1 << 20  # entries smaller than this are not ratio-checked
    max_total_size: int = 1 << 40


DEFAULT_LIMITS = ZipLimits()


@dataclass(frozen=True)
class ZipEntry:
    """One checked file entry: its normalised path and the zip's record of it."""

    path: str
    info: zipfile.ZipInfo

    @property
    def size(self) -> int:
        return self.info.file_size

    @property
    def mode(self) -> int:
        mode = (self.info.external_attr >> 16) & 0o7777
        return mode if self.info.create_system == 3 and mode else 0o644


def _open_zip(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise SourceError(f"{path}: no such file") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, OSError) as e:
        raise SourceError(f"{path}: not a readable zip archive (truncated or corrupt): {e}") from None


def _expansion_limit(info: zipfile.ZipInfo, limits: ZipLimits) -> int:
    return max(info.compress_size * limits.max_ratio, limits.ratio_floor)


def _check_overlap(path: Path, infos: list[zipfile.ZipInfo]) -> None:
    """Entries' data must not overlap one another or the central directory."""
    ordered = sorted(infos, key=lambda i: i.header_offset)
    for current, following in zip(ordered, ordered[1:], strict=False):
        end = current.header_offset + _LOCAL_HEADER.size + len(current.orig_filename.encode())
        end += current.compress_size
        if end > following.header_offset:
            raise SourceError(
                f"{path}: entries {current.filename!r} and {following.filename!r} overlap "
                "(zip bomb or corrupt archive)"
            )


def scan_zip(path: Path, limits: ZipLimits = DEFAULT_LIMITS) -> list[ZipEntry]:
    """Every file entry of the archive, checked; directory entries are dropped."""
    with _open_zip(path) as zf:
        infos = zf.infolist()
    if len(infos) > limits.max_entries:
        raise SourceError(f"{path}: {len(infos)} entries is more than the limit {limits.max_entries}")
    _check_overlap(path, infos)
    entries: list[ZipEntry] = []
    seen: set[str] = set()
    dirs: set[str] = set()
    total = 0
    for info in infos:
        name = info.filename
        if is_root_entry(name) and info.is_dir():
            continue  # './', as bsdtar writes a zip of '.': the archive's root
        try:
            rel = safe_relpath(name, "archive entry")
        except UnsafePath as e:
            raise UnsafePath(f"{path}: {e}") from None
        if info.is_dir():
            dirs.add(rel)
            continue
        if rel in seen:
            raise SourceError(f"{path}: duplicate entry {rel!r}")
        seen.add(rel)
        unix_type = stat.S_IFMT(info.external_attr >> 16) if info.create_system == 3 else 0
        if unix_type and unix_type != stat.S_IFREG:
            raise SourceError(f"{path}: entry {rel!r} is not a regular file (link or device)")
        if info.flag_bits & 0x1:
            raise SourceError(f"{path}: entry {rel!r} is encrypted; only plain archives are read")
        if info.compress_type not in SUPPORTED_METHODS:
            raise SourceError(
                f"{path}: entry {rel!r} uses unsupported compression method {info.compress_type}"
            )
        if info.file_size > _expansion_limit(info, limits):
            raise SourceError(
                f"{path}: entry {rel!r} expands {info.compress_size} → {info.file_size} bytes, "
                f"beyond the ratio limit {limits.max_ratio}:1 (zip bomb?)"
            )
        total += info.file_size
        if total > limits.max_total_size:
            raise SourceError(
                f"{path}: archive expands beyond the size limit of {limits.max_total_size} bytes"
            )
        entries.append(ZipEntry(rel, info))
    for entry in entries:
        parts = entry.path.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in seen:
                raise SourceError(f"{path}: {'/'.join(parts[:i])!r} is both a file and a directory")
    return entries


class EntryReader(ClosesOnExit):
    """A streaming reader of one entry, refusing more bytes than declared or allowed."""

    def __init__(self, path: Path, entry: ZipEntry, limits: ZipLimits = DEFAULT_LIMITS):
        self._path = path
        self._entry = entry
        self._limit = min(entry.size, _expansion_limit(entry.info, limits))
        self._zip = _open_zip(path)
        try:
            self._raw = self._zip.open(entry.info)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
            self._zip.close()
            raise SourceError(f"{path}: cannot read {entry.path}: {e}") from None
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        try:
            data = self._raw.read(n)
        except _DATA_ERRORS as e:
            raise SourceError(f"{self._path}: {self._entry.path}: corrupt entry data: {e}") from None
        self.count += len(data)
        if self.count > self._limit:
            raise SourceError(
                f"{self._path}: {self._entry.path} expands beyond {self._limit} bytes (zip bomb?)"
            )
        if not data and n != 0 and self.count != self._entry.size:
            raise SourceError(
                f"{self._path}: {self._entry.path}: got {self.count} bytes, "
                f"the archive declares {self._entry.size}"
            )
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            self._zip.close()


def open_entry(path: Path, entry: ZipEntry, limits: ZipLimits = DEFAULT_LIMITS) -> BinaryIO:
    return EntryReader(path, entry, limits)  # type: ignore[return-value]  # a bounded zip entry read()-stream where callers name BinaryIO


def read_small_entry(path: Path, entry: ZipEntry, max_bytes: int) -> bytes:
    """A small entry (a manifest) read whole, refusing anything larger than ``max_bytes``."""
    if entry.size > max_bytes:
        raise SourceError(f"{path}: {entry.path} is {entry.size} bytes, more than {max_bytes}")
    with open_entry(path, entry) as r:
        parts = []
        while chunk := r.read(1 << 16):
            parts.append(chunk)
    return b"".join(parts)


__all__ = [
    "DEFAULT_LIMITS",
    "EntryReader",
    "ZipEntry",
    "ZipLimits",
    "open_entry",
    "read_small_entry",
    "scan_zip",
]
