"""The one reader of hostile zips (``.carton``, ``.mlarchive``): a scan of the central directory
that checks everything before a byte of content is read, and a bounded reader of one member.

:func:`scan` refuses, in this order: an unreadable central directory (a truncated file), more
entries than the limit, an unsafe name (``../``, absolute, NUL: ``safe_relpath``; a backslash,
which a zip never means as a character: ``core.backslash``), a name twice (after normalising;
a directory entry counts), a member that is no regular file (a symlink, unless the format keeps
them; a device, fifo or socket), an encrypted member, a
compression method the format does not take, a declared size beyond the ratio limit or the
archive's total beyond its limit, a name that is both a file and a directory, and then, from the
local headers, data that overlaps another member's (the trick of non-recursive zip bombs) or runs
past the central directory, and a local name that is not the central one.

:class:`MemberReader` streams one member: stored, deflate and zstd data is read raw from its local
header on and decompressed here, in bounded steps; bzip2 and lzma go through :mod:`zipfile`. No
read returns more than the member declares: one byte beyond is an error, as is an end short of
it; at the end the CRC-32 (or the sha256 a format promises instead) is checked.

Each format passes its :class:`ZipRules`: the error class its failures raise (every message begins
with the archive's path), the methods it takes, whether it keeps symlinks.
"""

from __future__ import annotations

import hashlib
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from ocibridge.core.backslash import refuse_in_zip
from ocibridge.core.closing import ClosesOnExit
from ocibridge.core.environment import MAX_EXPANSION_RATIO
from ocibridge.core.fsutil import is_root_entry, safe_relpath
from ocibridge.core.limits import env_limit
from ocibridge.core.streams import CHUNK, Reader, unzstd
from ocibridge.errors import OcibridgeError, UnsafePath

METHOD_STORED = zipfile.ZIP_STORED
METHOD_DEFLATE = zipfile.ZIP_DEFLATED
METHOD_BZIP2 = zipfile.ZIP_BZIP2
METHOD_LZMA = zipfile.ZIP_LZMA
METHOD_ZSTD = 93
#: The methods decompressed here, from the raw data; the others known go through zipfile.
OWN_METHODS = frozenset({METHOD_STORED, METHOD_DEFLATE, METHOD_ZSTD})
#: zstd frames may ask for windows up to this size (the zstd default limit); more is refused.
MAX_ZSTD_WINDOW = 1 << 27
_LOCAL = struct.Struct("<4sHHHHHLLLHH")
_LOCAL_SIG = b"PK\x03\x04"
_FLAG_ENCRYPTED = 0x1
_FLAG_UTF8 = 0x800


@dataclass(frozen=True)
class ZipLimits:
    """Bomb limits. Deflate cannot exceed about 1032:1, so the default ratio only trips on other
    methods or forged headers; members under ``ratio_floor`` are not ratio-checked; the total caps
    what one archive may claim to hold. ``$OCIBRIDGE_MAX_EXPANSION_RATIO``, when set, replaces
    ``max_ratio``."""

    max_entries: int = 100_000
    max_ratio: int = 1100
    ratio_floor: int = 1 << 20
    max_total_size: int = 1 << 40


@dataclass(frozen=True)
class ZipRules:
    """What one format takes, and how its failures read."""

    error: type[OcibridgeError]
    methods: frozenset[int]
    links: bool = False  # symlink members (their target is their data) are kept, not refused
    #: what follows ``ARCHIVE: NAME: `` when a member's CRC-32 is wrong
    crc_mismatch: str = "CRC-32 mismatch (corrupt archive)"
    #: raised when the sha256 a caller expects differs (``error`` if None), and whose list that is
    digest_error: type[OcibridgeError] | None = None
    digests_from: str = "the expected digest"

    def fail(self, archive: Path, message: str) -> OcibridgeError:
        return self.error(f"{archive}: {message}")


@dataclass(frozen=True)
class ZipMember:
    """One checked member (a file, or a symlink where the format keeps them) and where its raw
    data starts."""

    path: str
    info: zipfile.ZipInfo
    data_offset: int
    is_link: bool
    size: int  # as declared: no read hands out more
    compress_size: int
    crc: int
    method: int
    mode: int  # 0o777 for a link, else 0o755 when the archive records an executable bit, else 0o644

    @classmethod
    def of(cls, path: str, info: zipfile.ZipInfo, data_offset: int, is_link: bool) -> ZipMember:
        executable = _unix_mode(info) & 0o111
        mode = 0o777 if is_link else (0o755 if executable else 0o644)
        return cls(path, info, data_offset, is_link, info.file_size, info.compress_size, info.CRC,
                   info.compress_type, mode)


def _central_directory(archive: Path, rules: ZipRules) -> tuple[list[zipfile.ZipInfo], int]:
    try:
        with zipfile.ZipFile(archive) as zf:
            return zf.infolist(), zf.start_dir  # where the central directory begins
    except FileNotFoundError:
        raise rules.fail(archive, "no such file") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, OSError) as e:
        raise rules.fail(archive, f"not a readable zip archive (truncated or corrupt): {e}") from None


def _unix_mode(info: zipfile.ZipInfo) -> int:
    return (info.external_attr >> 16) if info.create_system == 3 else 0


def _checked_member(archive: Path, rules: ZipRules, rel: str, info: zipfile.ZipInfo) -> bool:
    """Whether the file entry ``info`` is a symlink; refuses what the format does not take."""
    kind = stat.S_IFMT(_unix_mode(info))
    is_link = kind == stat.S_IFLNK
    if kind not in (0, stat.S_IFREG) and not (is_link and rules.links):
        what = "a symlink" if is_link else "a device, fifo or socket"
        kept = " or a symlink" if rules.links else ""
        raise rules.fail(archive, f"entry {rel!r} is {what}, not a regular file{kept}")
    if info.flag_bits & _FLAG_ENCRYPTED:
        raise rules.fail(archive, f"entry {rel!r} is encrypted; only plain archives are read")
    if info.compress_type not in rules.methods:
        raise rules.fail(archive, f"entry {rel!r} uses unsupported compression method {info.compress_type}")
    return is_link


def scan(archive: Path, rules: ZipRules, limits: ZipLimits = ZipLimits()) -> list[ZipMember]:
    """Every file (and kept symlink) member of ``archive``, checked as the module says;
    directory entries are dropped. Raises ``rules.error`` (``UnsafePath`` for a name), one line
    naming the archive."""
    infos, cd_start = _central_directory(archive, rules)
    if len(infos) > limits.max_entries:
        raise rules.fail(archive, f"{len(infos)} entries is more than the limit {limits.max_entries}")
    ratio = env_limit(MAX_EXPANSION_RATIO, limits.max_ratio)
    seen: set[str] = set()
    files: dict[str, tuple[zipfile.ZipInfo, bool]] = {}
    total = 0
    for info in infos:
        if is_root_entry(info.filename) and info.is_dir():
            continue  # './', as bsdtar writes a zip of '.': the archive's root
        try:
            refuse_in_zip(info.filename, "archive entry")  # a zip made on Windows may mean folders by it
            rel = safe_relpath(info.filename, "archive entry")
        except UnsafePath as e:
            raise UnsafePath(f"{archive}: {e}") from None
        if rel in seen:
            raise rules.fail(archive, f"duplicate entry {rel!r}")
        seen.add(rel)
        if info.is_dir() or stat.S_ISDIR(_unix_mode(info)):
            continue
        is_link = _checked_member(archive, rules, rel, info)
        if info.file_size > max(info.compress_size * ratio, limits.ratio_floor):
            raise rules.fail(
                archive,
                f"entry {rel!r} claims {info.compress_size} → {info.file_size} bytes, beyond the ratio "
                f"limit {ratio}:1 (zip bomb?); ${MAX_EXPANSION_RATIO} changes the ratio",
            )
        total += info.file_size
        if total > limits.max_total_size:
            raise rules.fail(
                archive, f"archive expands beyond the limit of {limits.max_total_size} bytes (its size limit)"
            )
        files[rel] = (info, is_link)
    for name in seen:
        parts = name.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in files:
                raise rules.fail(archive, f"{'/'.join(parts[:i])!r} is both a file and a directory")
    return _locate_data(archive, rules, files, cd_start)


def _locate_data(
    archive: Path, rules: ZipRules, files: dict[str, tuple[zipfile.ZipInfo, bool]], cd_start: int
) -> list[ZipMember]:
    """Each member's data offset, from its local header: no two members' data overlap, none runs
    past the central directory, and each local name is its central name."""
    members: list[ZipMember] = []
    spans: list[tuple[int, int, str]] = []
    renamed: list[str] = []
    with open(archive, "rb") as f:
        for rel, (info, is_link) in files.items():
            f.seek(info.header_offset)
            header = f.read(_LOCAL.size)
            if len(header) != _LOCAL.size or header[:4] != _LOCAL_SIG:
                raise rules.fail(archive, f"entry {rel!r}: bad local header (truncated or corrupt zip)")
            name_len, extra_len = _LOCAL.unpack(header)[9:]
            encoding = "utf-8" if info.flag_bits & _FLAG_UTF8 else "cp437"
            if f.read(name_len) != info.orig_filename.encode(encoding):
                renamed.append(rel)
            offset = info.header_offset + _LOCAL.size + name_len + extra_len
            spans.append((info.header_offset, offset + info.compress_size, rel))
            members.append(ZipMember.of(rel, info, offset, is_link))
        end = cd_start or f.seek(0, 2)
    spans.sort()
    for (_, stop, name), (start, _, following) in zip(spans, spans[1:], strict=False):
        if stop > start:
            raise rules.fail(archive, f"entries {name!r} and {following!r} overlap (zip bomb or corrupt archive)")
    if spans and spans[-1][1] > end:
        raise rules.fail(archive, f"entry {spans[-1][2]!r} runs past the end of its data (truncated archive)")
    if renamed:
        raise rules.fail(archive, f"entry {renamed[0]!r}: local and central names differ")
    return members


class _RawSection:
    """The compressed bytes of one member, and not one byte more."""

    def __init__(self, f: BinaryIO, remaining: int):
        self._f, self.remaining = f, remaining

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0 or n > self.remaining:
            n = self.remaining
        data = self._f.read(n)
        self.remaining -= len(data)
        return data


class MemberReader(ClosesOnExit):
    """A streaming reader of one member's content: never more than it declares, its size checked
    at the end, and its CRC-32 (``crc``) or the ``sha256`` a caller expects. ``crc=False`` without
    a ``sha256`` says the caller checks a digest of what it reads."""

    def __init__(
        self, archive: Path, member: ZipMember, rules: ZipRules, *, crc: bool = True, sha256: str | None = None
    ):
        self._archive, self._member, self._rules = archive, member, rules
        self._expect = sha256
        self._sha = hashlib.sha256() if sha256 else None
        self._crc: int | None = 0 if crc and not sha256 and member.method in OWN_METHODS else None
        self.count = 0
        self._done = False
        self._errors: tuple[type[BaseException], ...] = (zlib.error,)
        self._held: list[IO[bytes] | zipfile.ZipFile] = []  # closed in close(), last first
        self._next: Callable[[int], bytes]
        try:
            if member.method in OWN_METHODS:
                f = open(archive, "rb")  # noqa: SIM115 - closed in close()
                self._held.append(f)
                f.seek(member.data_offset)
                self._next = self._own_decoder(_RawSection(f, member.compress_size))
            else:  # bzip2, lzma: zipfile decompresses and checks the CRC at the end
                zf = zipfile.ZipFile(archive)
                self._held.append(zf)
                entry = zf.open(member.info)
                self._held.append(entry)
                self._next = entry.read
                self._errors = (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error, _lzma_error())
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
            self.close()
            raise rules.fail(archive, f"cannot read {member.path}: {e}") from None

    def _own_decoder(self, raw: _RawSection) -> Callable[[int], bytes]:
        if self._member.method == METHOD_STORED:
            return raw.read
        if self._member.method == METHOD_ZSTD:
            import zstandard

            self._errors = (zstandard.ZstdError,)
            reader: Reader = unzstd(raw, max_window_size=MAX_ZSTD_WINDOW, read_size=CHUNK)
            return reader.read
        inflater = zlib.decompressobj(-15)

        def inflate(n: int) -> bytes:
            while True:
                if inflater.unconsumed_tail:
                    data = inflater.decompress(inflater.unconsumed_tail, n)
                else:
                    chunk = raw.read(CHUNK)
                    if not chunk:
                        return b"" if inflater.eof else inflater.flush()[:n]
                    data = inflater.decompress(chunk, n)
                if data or inflater.eof:
                    return data

        return inflate

    def _where(self) -> str:
        return f"{self._archive}: {self._member.path}"

    def read(self, n: int | None = -1) -> bytes:
        if self._done:
            return b""
        if n is None or n < 0:
            parts = []
            while part := self.read(CHUNK):
                parts.append(part)
            return b"".join(parts)
        if n == 0:
            return b""
        size = self._member.size
        try:
            data = self._next(min(n, max(size - self.count, 0) + 1))
        except self._errors as e:
            raise self._rules.error(f"{self._where()}: corrupt entry data: {e}") from None
        if not data:
            self._finish()
            return b""
        if self.count + len(data) > size:
            self._overflow(data[: size - self.count])
        self.count += len(data)
        if self._crc is not None:
            self._crc = zlib.crc32(data, self._crc)
        if self._sha is not None:
            self._sha.update(data)
        return data

    def _overflow(self, declared_rest: bytes) -> None:
        """More than declared: a wrong CRC over the declared bytes says the data is corrupt, else
        the member really inflates beyond its declared size."""
        if self._crc is not None and zlib.crc32(declared_rest, self._crc) != self._member.crc:
            raise self._rules.error(f"{self._where()}: {self._rules.crc_mismatch}")
        raise self._rules.error(f"{self._where()} expands beyond its declared {self._member.size} bytes (zip bomb?)")

    def _finish(self) -> None:
        self._done = True
        if self.count != self._member.size:
            raise self._rules.error(
                f"{self._where()}: got {self.count} bytes, the archive declares {self._member.size}"
            )
        if self._crc is not None and self._crc != self._member.crc:
            raise self._rules.error(f"{self._where()}: {self._rules.crc_mismatch}")
        if self._sha is not None and self._sha.hexdigest() != self._expect:
            raise (self._rules.digest_error or self._rules.error)(
                f"{self._where()}: content sha256 {self._sha.hexdigest()} does not match "
                f"{self._rules.digests_from} ({self._expect})"
            )

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        while self._held:
            self._held.pop().close()


def _lzma_error() -> type[BaseException]:
    import lzma

    return lzma.LZMAError


def read_member_bytes(archive: Path, member: ZipMember, rules: ZipRules, max_bytes: int) -> bytes:
    """A small member (a manifest, a link's target) read whole, refusing more than ``max_bytes``."""
    if member.size > max_bytes:
        raise rules.fail(archive, f"{member.path} is {member.size} bytes, more than the limit {max_bytes}")
    with MemberReader(archive, member, rules) as r:
        return r.read()


__all__ = [
    "METHOD_BZIP2",
    "METHOD_DEFLATE",
    "METHOD_LZMA",
    "METHOD_STORED",
    "METHOD_ZSTD",
    "MemberReader",
    "ZipLimits",
    "ZipMember",
    "ZipRules",
    "read_member_bytes",
    "scan",
]
