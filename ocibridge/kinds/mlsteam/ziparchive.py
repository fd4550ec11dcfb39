"""An ``.mlarchive``'s zip, read by the one bounded zip reader (:mod:`ocibridge.core.zipbound`)
under MLSteam's rules: the methods Python's zipfile writes (stored, deflate, bzip2, lzma), no
symlinks, :class:`SourceError` for every failure (a wrong CRC reads as zipfile said it)."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from ocibridge.core import zipbound
from ocibridge.core.zipbound import ZipLimits
from ocibridge.errors import SourceError

#: Compression methods Python's zipfile decompresses everywhere we run.
SUPPORTED_METHODS = {
    zipbound.METHOD_STORED: "stored",
    zipbound.METHOD_DEFLATE: "deflate",
    zipbound.METHOD_BZIP2: "bzip2",
    zipbound.METHOD_LZMA: "lzma",
}
MLARCHIVE_ZIP = zipbound.ZipRules(
    error=SourceError,
    methods=frozenset(SUPPORTED_METHODS),
    crc_mismatch="corrupt entry data: Bad CRC-32",
)
DEFAULT_LIMITS = ZipLimits()
#: One checked file entry: its normalised path and the zip's record of it.
ZipEntry = zipbound.ZipMember


def scan_zip(path: Path, limits: ZipLimits = DEFAULT_LIMITS) -> list[ZipEntry]:
    """Every file entry of the archive, checked; directory entries are dropped."""
    return zipbound.scan(path, MLARCHIVE_ZIP, limits)


def open_entry(path: Path, entry: ZipEntry) -> BinaryIO:
    return zipbound.MemberReader(path, entry, MLARCHIVE_ZIP)  # type: ignore[return-value]  # a bounded zip entry read()-stream where callers name BinaryIO


def read_small_entry(path: Path, entry: ZipEntry, max_bytes: int) -> bytes:
    """A small entry (a manifest) read whole, refusing anything larger than ``max_bytes``."""
    return zipbound.read_member_bytes(path, entry, MLARCHIVE_ZIP, max_bytes)


__all__ = [
    "DEFAULT_LIMITS",
    "ZipEntry",
    "ZipLimits",
    "open_entry",
    "read_small_entry",
    "scan_zip",
]
