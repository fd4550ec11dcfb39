"""A carton's zip, read by the one bounded zip reader (:mod:`ocibridge.core.zipbound`) under
Carton's rules: Stored, Deflate and zstd (method 93), symlinks kept (their target is their data),
:class:`CartonError` for every failure, and generous limits (zstd reaches high ratios on sparse
data). At the end of every entry its size is checked, and either the sha256 the MANIFEST
promises or, for content nobody checks by sha256, the zip's CRC-32. (The CRC is skipped under a
sha256 check: it is strictly weaker and costs ~40 % of sha256's time.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ocibridge.core.zipbound import (
    METHOD_DEFLATE,
    METHOD_STORED,
    METHOD_ZSTD,
    MemberReader,
    ZipLimits,
    ZipMember,
    ZipRules,
    read_member_bytes,
    scan,
)
from ocibridge.kinds.carton.errors import CartonError, CartonMismatch

METHODS = {METHOD_STORED: "stored", METHOD_DEFLATE: "deflate", METHOD_ZSTD: "zstd"}
MAX_LINK_TARGET = 4096
CARTON_ZIP = ZipRules(
    error=CartonError,
    methods=frozenset(METHODS),
    links=True,
    digest_error=CartonMismatch,
    digests_from="MANIFEST",
)

#: One checked zip entry (file or symlink) with where its raw data starts.
CartonEntry = ZipMember


@dataclass(frozen=True)
class CartonLimits(ZipLimits):
    """Bomb and size limits: zstd legitimately reaches high ratios on sparse data, so the ratio
    limit is generous; MANIFEST, LINKS and carton.toml are read whole, up to ``max_small_file``."""

    max_ratio: int = 10_000
    max_small_file: int = 16 << 20


DEFAULT_LIMITS = CartonLimits()


def scan_entries(archive: Path, limits: CartonLimits = DEFAULT_LIMITS) -> list[CartonEntry]:
    """Every file and symlink entry, checked (see :func:`ocibridge.core.zipbound.scan`)."""
    return scan(archive, CARTON_ZIP, limits)


class EntryReader(MemberReader):
    """A streaming reader of one entry's content; verifies its size, and its sha256 if given,
    else its CRC-32. ``sha256_checked_by_caller`` says the caller hashes what it reads and
    compares the result with MANIFEST (a :class:`VerifyingReader` on top), so no CRC is needed."""

    def __init__(
        self,
        archive: Path,
        entry: CartonEntry,
        expect_sha256: str | None = None,
        *,
        sha256_checked_by_caller: bool = False,
    ):
        super().__init__(archive, entry, CARTON_ZIP, crc=not sha256_checked_by_caller, sha256=expect_sha256)


def read_entry_bytes(archive: Path, entry: CartonEntry, max_bytes: int) -> bytes:
    """A small entry (MANIFEST, LINKS, carton.toml, a link target) read whole, size-capped."""
    return read_member_bytes(archive, entry, CARTON_ZIP, max_bytes)


def link_target(archive: Path, entry: CartonEntry) -> str:
    data = read_entry_bytes(archive, entry, MAX_LINK_TARGET)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CARTON_ZIP.fail(archive, f"symlink {entry.path!r} has a target that is not UTF-8") from None
