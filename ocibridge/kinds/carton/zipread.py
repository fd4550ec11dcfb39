"""Hostile-until-checked reading of a carton's zip: Stored, Deflate and zstd (method 93), zip64.

Python's ``zipfile`` parses the central directory (zip64 included) but cannot decompress
method 93 before 3.14, so entry data is read raw from its local header on and decompressed
here, in bounded steps: a reader never holds more than one chunk of output, never yields more
than the entry declares, and the declared size itself is checked against the compressed size
(ratio) and the archive's total. At the end of every entry the size is checked, and either the
sha256 the MANIFEST promises or, for content nobody checks by sha256, the zip's CRC-32. (The
CRC is skipped under a sha256 check: it is strictly weaker and costs ~40 % of sha256's time.)
"""

from __future__ import annotations

import hashlib
import stat
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import zstandard

from ocibridge.core.closing import ClosesOnExit
from ocibridge.core.fsutil import is_root_entry, safe_relpath
from ocibridge.core.streams import unzstd
from ocibridge.errors import UnsafePath
from ocibridge.kinds.carton.errors import CartonError, CartonMismatch
from ocibridge.oci.digest import CHUNK

METHOD_STORED = 0
METHOD_DEFLATE = 8
METHOD_ZSTD = 93
METHODS = {METHOD_STORED: "stored", METHOD_DEFLATE: "deflate", METHOD_ZSTD: "zstd"}
_LOCAL = struct.Struct("<4sHHHHHLLLHH")
_LOCAL_SIG = b"PK\x03\x04"
MAX_LINK_TARGET = 4096
#: zstd frames may ask for windows up to this size (the zstd default limit); more is refused.
MAX_ZSTD_WINDOW = 1 << 27


@dataclass(frozen=True)
class CartonLimits:
    """Bomb and size limits. zstd legitimately reaches high ratios on sparse data, so the ratio
    limit is generous and entries under ``ratio_floor`` are not ratio-checked; the total caps
    what one archive may expand to."""

    max_entries: int = 100_000
    max_ratio: int = 10_000
    ratio_floor: int = 1 << 20
    max_total_size: int = 1 << 40
    max_small_file: int = 16 << 20  # MANIFEST, LINKS, carton.toml are read whole


DEFAULT_LIMITS = CartonLimits()


@dataclass(frozen=True)
class CartonEntry:
    """One checked zip entry (file or symlink) with where its raw data starts."""

    path: str
    method: int
    compress_size: int
    size: int
    crc: int
    data_offset: int
    mode: int
    is_link: bool


def _fail(archive: Path, message: str) -> CartonError:
    return CartonError(f"{archive}: {message}")


def _unix_mode(info: zipfile.ZipInfo) -> int:
    return (info.external_attr >> 16) if info.create_system == 3 else 0


def _data_offset(f: BinaryIO, archive: Path, info: zipfile.ZipInfo) -> int:
    f.seek(info.header_offset)
    header = f.read(_LOCAL.size)
    if len(header) != _LOCAL.size or header[:4] != _LOCAL_SIG:
        raise _fail(archive, f"entry {info.filename!r}: bad local header (truncated or corrupt zip)")
    fields = _LOCAL.unpack(header)
    name_len, extra_len = int(fields[9]), int(fields[10])
    name = f.read(name_len)
    if name != info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437"):
        raise _fail(archive, f"entry {info.filename!r}: local and central names differ")
    return info.header_offset + _LOCAL.size + name_len + extra_len


def _open_zip(archive: Path) -> tuple[list[zipfile.ZipInfo], int]:
    try:
        with zipfile.ZipFile(archive) as zf:
            return zf.infolist(), zf.start_dir  # where the central directory begins (set on every read)
    except FileNotFoundError:
        raise CartonError(f"{archive}: no such file") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, OSError) as e:
        raise _fail(archive, f"not a readable zip archive (truncated or corrupt): {e}") from None


def scan_entries(archive: Path, limits: CartonLimits = DEFAULT_LIMITS) -> list[CartonEntry]:
    """Every file and symlink entry, checked: safe unique names, known methods, no encryption,
    no overlapping data, sizes within the ratio and total limits. Directories are dropped."""
    infos, cd_start = _open_zip(archive)
    if len(infos) > limits.max_entries:
        raise _fail(archive, f"{len(infos)} entries is more than the limit {limits.max_entries}")
    entries: list[CartonEntry] = []
    seen: set[str] = set()
    total = 0
    spans: list[tuple[int, int, str]] = []
    with open(archive, "rb") as f:
        for info in infos:
            if is_root_entry(info.filename) and info.is_dir():
                continue  # './', as bsdtar writes a zip of '.': the archive's root
            try:
                rel = safe_relpath(info.filename.rstrip("/") or info.filename, "archive entry")
            except UnsafePath as e:
                raise UnsafePath(f"{archive}: {e}") from None
            if rel in seen:
                raise _fail(archive, f"duplicate entry {rel!r}")
            seen.add(rel)
            mode = _unix_mode(info)
            if info.filename.endswith("/") or stat.S_ISDIR(mode):
                continue
            kind = stat.S_IFMT(mode)
            is_link = kind == stat.S_IFLNK
            if kind not in (0, stat.S_IFREG, stat.S_IFLNK):
                raise _fail(archive, f"entry {rel!r} is a device, fifo or socket")
            if info.flag_bits & 0x1:
                raise _fail(archive, f"entry {rel!r} is encrypted")
            if info.compress_type not in METHODS:
                raise _fail(archive, f"entry {rel!r} uses unsupported compression method {info.compress_type}")
            if info.file_size > max(info.compress_size * limits.max_ratio, limits.ratio_floor):
                raise _fail(
                    archive,
                    f"entry {rel!r} claims {info.compress_size} → {info.file_size} bytes, beyond the "
                    f"ratio limit {limits.max_ratio}:1 (zip bomb?)",
                )
            total += info.file_size
            if total > limits.max_total_size:
                raise _fail(archive, f"archive expands beyond the limit of {limits.max_total_size} bytes")
            offset = _data_offset(f, archive, info)
            spans.append((info.header_offset, offset + info.compress_size, rel))
            entries.append(
                CartonEntry(
                    path=rel,
                    method=info.compress_type,
                    compress_size=info.compress_size,
                    size=info.file_size,
                    crc=info.CRC,
                    data_offset=offset,
                    mode=0o777 if is_link else (0o755 if mode & 0o111 else 0o644),
                    is_link=is_link,
                )
            )
        size = f.seek(0, 2)
    _check_spans(archive, spans, cd_start or size)
    return entries


def _check_spans(archive: Path, spans: list[tuple[int, int, str]], end: int) -> None:
    """Entry data must not overlap (the trick of non-recursive zip bombs) nor run past the
    central directory (a truncated archive)."""
    spans.sort()
    for (_, stop, name), (start, _, following) in zip(spans, spans[1:], strict=False):
        if stop > start:
            raise _fail(archive, f"entries {name!r} and {following!r} overlap (zip bomb or corrupt archive)")
    if spans and spans[-1][1] > end:
        raise _fail(archive, f"entry {spans[-1][2]!r} runs past the end of its data (truncated archive)")


class _RawSection:
    """The compressed bytes of one entry, and not one byte more."""

    def __init__(self, f: BinaryIO, remaining: int):
        self._f, self.remaining = f, remaining

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0 or n > self.remaining:
            n = self.remaining
        data = self._f.read(n)
        self.remaining -= len(data)
        return data


class EntryReader(ClosesOnExit):
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
        self._archive, self._entry, self._expect = archive, entry, expect_sha256
        self._check_crc = not (expect_sha256 or sha256_checked_by_caller)
        try:
            self._file = open(archive, "rb")  # noqa: SIM115 - closed in close()
        except OSError as e:
            raise _fail(archive, f"cannot open: {e}") from None
        self._file.seek(entry.data_offset)
        self._raw = _RawSection(self._file, entry.compress_size)
        self._zlib = zlib.decompressobj(-15) if entry.method == METHOD_DEFLATE else None
        self._zstd = None
        if entry.method == METHOD_ZSTD:
            self._zstd = unzstd(self._raw, max_window_size=MAX_ZSTD_WINDOW, read_size=CHUNK)
        self._pending = b""
        self._crc = 0
        self._sha = hashlib.sha256() if expect_sha256 else None
        self.count = 0
        self._done = False

    def _inflate(self, n: int) -> bytes:
        assert self._zlib is not None
        while True:
            if self._zlib.unconsumed_tail:
                data = self._zlib.decompress(self._zlib.unconsumed_tail, n)
            else:
                chunk = self._raw.read(CHUNK)
                if not chunk:
                    return self._zlib.flush()[:n] if not self._zlib.eof else b""
                data = self._zlib.decompress(chunk, n)
            if data or self._zlib.eof:
                return data

    def _next(self, n: int) -> bytes:
        try:
            if self._zstd is not None:
                return self._zstd.read(n)
            if self._zlib is not None:
                return self._inflate(n)
            return self._raw.read(n)
        except (zstandard.ZstdError, zlib.error) as e:
            raise _fail(self._archive, f"{self._entry.path}: corrupt compressed data: {e}") from None

    def read(self, n: int = -1) -> bytes:
        if self._done:
            return b""
        if n is None or n < 0:
            parts = []
            while part := self.read(CHUNK):
                parts.append(part)
            return b"".join(parts)
        if n == 0:
            return b""
        data = self._next(min(n, max(self._entry.size - self.count, 0) + 1))
        if data:
            self.count += len(data)
            if self.count > self._entry.size:
                raise _fail(
                    self._archive,
                    f"{self._entry.path} expands beyond its declared {self._entry.size} bytes (zip bomb?)",
                )
            if self._check_crc:
                self._crc = zlib.crc32(data, self._crc)
            if self._sha is not None:
                self._sha.update(data)
            return data
        self._finish()
        return b""

    def _finish(self) -> None:
        self._done = True
        where = f"{self._archive}: {self._entry.path}"
        if self.count != self._entry.size:
            raise CartonError(f"{where}: got {self.count} bytes, the archive declares {self._entry.size}")
        if self._check_crc and self._crc != self._entry.crc:
            raise CartonError(f"{where}: CRC-32 mismatch (corrupt archive)")
        if self._sha is not None and self._sha.hexdigest() != self._expect:
            raise CartonMismatch(
                f"{where}: content sha256 {self._sha.hexdigest()} does not match MANIFEST ({self._expect})"
            )

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._file.close()


def read_entry_bytes(archive: Path, entry: CartonEntry, max_bytes: int) -> bytes:
    """A small entry (MANIFEST, LINKS, carton.toml, a link target) read whole, size-capped."""
    if entry.size > max_bytes:
        raise _fail(archive, f"{entry.path} is {entry.size} bytes, more than the limit {max_bytes}")
    with EntryReader(archive, entry) as r:
        return r.read()


def link_target(archive: Path, entry: CartonEntry) -> str:
    data = read_entry_bytes(archive, entry, MAX_LINK_TARGET)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail(archive, f"symlink {entry.path!r} has a target that is not UTF-8") from None
