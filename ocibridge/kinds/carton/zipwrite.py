"""A small streaming zip writer for cartons: zstd (method 93) or stored entries, zip64, symlinks.

``zipfile`` cannot compress with zstd before Python 3.14, so entries are written here the way
the Carton library's zip crate writes them: local header, data, no data descriptor (the header
is patched in place once sizes and CRC are known, so the output must be seekable), zip64
extra fields for big entries, a central directory and, when needed, the zip64 end records.
Timestamps are fixed (1980-01-01) so an export does not depend on the clock.
"""

from __future__ import annotations

import stat
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import BinaryIO

import zstandard

from ocibridge.core.backslash import refuse_in_zip
from ocibridge.core.fsutil import write_sliced
from ocibridge.core.zipbound import METHOD_STORED, METHOD_ZSTD

#: The zstd level the Carton library's zip crate uses (zstd's default).
ZSTD_LEVEL = 3
VERSION_MADE_BY = (3 << 8) | 46  # unix, spec 4.6 — as the zip crate writes
VERSION_NEEDED = 20
VERSION_NEEDED_ZIP64 = 45
DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01
DOS_TIME = 0
U32 = 0xFFFFFFFF
#: Entries at least this large get zip64 fields up front (compressed output may be a little
#: larger than the input, so the margin keeps the patched header honest).
ZIP64_THRESHOLD = U32 - (64 << 20)
_LOCAL = struct.Struct("<4sHHHHHLLLHH")
_CENTRAL = struct.Struct("<4sHHHHHHLLLHHHHHLL")
_EOCD = struct.Struct("<4sHHHHLLH")
_EOCD64 = struct.Struct("<4sQHHLLQQQQ")
_LOCATOR = struct.Struct("<4sLQL")


@dataclass(frozen=True)
class WrittenEntry:
    name: str
    method: int
    crc: int
    size: int
    compress_size: int
    offset: int
    external_attr: int
    zip64: bool
    flags: int


class ZipWriter:
    """Writes entries one after another into a seekable binary file; ``close`` ends the zip."""

    def __init__(self, out: BinaryIO):
        self._out = out
        self.entries: list[WrittenEntry] = []
        self._names: set[str] = set()

    def _local_header(
        self, name: bytes, flags: int, method: int, crc: int, size: int, csize: int, zip64: bool
    ) -> bytes:
        extra = struct.pack("<HHQQ", 1, 16, size, csize) if zip64 else b""
        header = _LOCAL.pack(
            b"PK\x03\x04",
            VERSION_NEEDED_ZIP64 if zip64 else VERSION_NEEDED,
            flags,
            method,
            DOS_TIME,
            DOS_DATE,
            crc,
            U32 if zip64 else csize,
            U32 if zip64 else size,
            len(name),
            len(extra),
        )
        return header + name + extra

    def add(self, name: str, chunks: Iterable[bytes], *, method: int = METHOD_ZSTD, size_hint: int = 0,
            mode: int = 0o644, link: bool = False) -> WrittenEntry:
        """Write one entry from a chunk stream; returns what was written (CRC, sizes)."""
        refuse_in_zip(name, "zip entry")  # no one file to an unzip that reads it as a separator
        if name in self._names:
            raise ValueError(f"zip entry {name!r} written twice")
        self._names.add(name)
        encoded = name.encode("utf-8")
        flags = 0x800 if not name.isascii() else 0
        zip64 = size_hint >= ZIP64_THRESHOLD
        offset = self._out.tell()
        self._out.write(self._local_header(encoded, flags, method, 0, 0, 0, zip64))
        crc = size = csize = 0
        compressor = (
            zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=False).compressobj()
            if method == METHOD_ZSTD
            else None
        )
        for chunk in chunks:
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
            data = compressor.compress(chunk) if compressor is not None else chunk
            csize += len(data)
            write_sliced(self._out, data)
        if compressor is not None:
            tail = compressor.flush()
            csize += len(tail)
            self._out.write(tail)
        if not zip64 and (size >= U32 or csize >= U32):
            raise ValueError(f"zip entry {name!r} grew past 4 GiB without zip64 (size hint {size_hint})")
        end = self._out.tell()
        self._out.seek(offset)
        self._out.write(self._local_header(encoded, flags, method, crc, size, csize, zip64))
        self._out.seek(end)
        file_type = stat.S_IFLNK if link else stat.S_IFREG
        perms = 0o777 if link else (0o755 if mode & 0o111 else 0o644)
        entry = WrittenEntry(name, method, crc, size, csize, offset, (file_type | perms) << 16, zip64, flags)
        self.entries.append(entry)
        return entry

    def add_symlink(self, name: str, target: str) -> WrittenEntry:
        """A symlink as the zip crate stores one: stored, mode 0o120777, the target as data."""
        return self.add(name, [target.encode("utf-8")], method=METHOD_STORED, link=True)

    def close(self) -> None:
        cd_start = self._out.tell()
        for e in self.entries:
            name = e.name.encode("utf-8")
            big_offset = e.offset >= U32
            fields = [e.size, e.compress_size] if e.zip64 else []
            if big_offset:
                fields.append(e.offset)
            extra = struct.pack(f"<HH{len(fields)}Q", 1, 8 * len(fields), *fields) if fields else b""
            self._out.write(
                _CENTRAL.pack(
                    b"PK\x01\x02",
                    VERSION_MADE_BY,
                    VERSION_NEEDED_ZIP64 if fields else VERSION_NEEDED,
                    e.flags,
                    e.method,
                    DOS_TIME,
                    DOS_DATE,
                    e.crc,
                    U32 if e.zip64 else e.compress_size,
                    U32 if e.zip64 else e.size,
                    len(name),
                    len(extra),
                    0,
                    0,
                    0,
                    e.external_attr,
                    U32 if big_offset else e.offset,
                )
                + name
                + extra
            )
        cd_end = self._out.tell()
        count, cd_size = len(self.entries), cd_end - cd_start
        if count >= 0xFFFF or cd_size >= U32 or cd_start >= U32:
            self._out.write(
                _EOCD64.pack(b"PK\x06\x06", _EOCD64.size - 12, VERSION_MADE_BY, VERSION_NEEDED_ZIP64,
                             0, 0, count, count, cd_size, cd_start)
            )
            self._out.write(_LOCATOR.pack(b"PK\x06\x07", 0, cd_end, 1))
            self._out.write(_EOCD.pack(b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, U32, U32, 0))
        else:
            self._out.write(_EOCD.pack(b"PK\x05\x06", 0, 0, count, count, cd_size, cd_start, 0))
        self._out.flush()
