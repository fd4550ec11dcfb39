"""Containers of other files: zip archives (a PyTorch checkpoint is a zip whose ``data.pkl`` is a
pickle; a ``.keras`` model a zip with its ``config.json``; ``.npz`` a zip of ``.npy``) and
compressed streams (joblib's zlib, gzip, bz2, xz): each member and each decompressed stream is
judged by its own content. Opened as PyTorch opens zips (picklescan's relaxed reader: no CRC
or name checks), so a zip torch loads is never one the scanner cannot read."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, Protocol

from ocibridge.lazyread.tensorfile import RangeReadable
from ocibridge.scanning import keras, numpyfiles
from ocibridge.scanning.content import LocalFile, StreamContent, stream_of
from ocibridge.scanning.library import pickle_findings
from ocibridge.scanning.report import Finding
from ocibridge.scanning.sniff import compression_of, looks_like_pickle

MAX_NESTING = 4
MAX_MEMBERS = 1 << 16
#: a compressed stream is decompressed (to a temporary file) up to this many bytes
MAX_DECOMPRESSED = 4 << 30
_PICKLE_NAMES = (".pkl", ".pickle")
_PIECE = 1 << 20
ZSTD = 93


class Judge(Protocol):
    """How a member or a stream is judged in turn: the scanner's own entry (formats.scan_content)."""

    def __call__(self, path: str, content: RangeReadable, *, where: str = "",
                 depth: int = 0) -> tuple[str, list[Finding]]: ...


def zip_findings(path: str, content: RangeReadable, where: str, depth: int, judge: Judge) -> list[Finding]:
    from picklescan.relaxed_zipfile import RelaxedZipFile

    if depth >= MAX_NESTING:
        return [Finding(path, "high", f"archives nested more than {MAX_NESTING} deep: not scanned", where)]
    found: list[Finding] = []
    try:
        archive = RelaxedZipFile(stream_of(content), "r")
    except Exception as e:  # noqa: BLE001  # (zipfile raises many kinds for a broken archive)
        return [Finding(path, "high", f"zip archive does not open: {e}", where)]
    with archive:
        members = [m for m in archive.infolist() if not m.is_dir()]
        if len(members) > MAX_MEMBERS:
            return [Finding(path, "high", f"zip archive of {len(members)} members (over {MAX_MEMBERS}): "
                                          "not scanned", where)]
        for member in members:
            inside = f"{where}/{member.filename}" if where else member.filename
            try:
                with _member(archive, member, content) as opened:
                    found += _member_findings(path, opened, member.filename.lower(), inside, depth, judge)
            except Exception as e:  # noqa: BLE001  # a member that does not read: said, never skipped silently
                found.append(Finding(path, "high", f"zip member does not read: {e}", inside))
    return found


def _member_findings(path: str, member: StreamContent, named: str, inside: str, depth: int,
                     judge: Judge) -> list[Finding]:
    """A member judged as the loaders of zips judge it: pickles, arrays, nested archives and
    streams, JSON configurations, HDF5; tensor storages (raw numbers) are not pickles."""
    head = member.read(0, 16)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06", numpyfiles.NPY_MAGIC)) or compression_of(head) is not None:
        return judge(path, member, where=inside, depth=depth + 1)[1]
    if named.endswith(_PICKLE_NAMES) or looks_like_pickle(head):
        return pickle_findings(path, stream_of(member), inside)
    if head.lstrip()[:1] == b"{" and member.size <= keras.MAX_CONFIG:
        return keras.json_findings(path, member.read(0, member.size), inside)
    if head.startswith(keras.HDF5_MAGIC):
        return keras.hdf5_findings(path, member, inside)
    return []


@contextmanager
def _member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, content: RangeReadable) -> Iterator[StreamContent]:
    """A member's bytes; one compressed with Zstandard (method 93, which carton writes and
    Python's zipfile reads only from 3.14) decompressed to a temporary file."""
    if member.compress_type != ZSTD:
        with archive.open(member) as f:
            yield StreamContent(f, member.file_size)
        return
    import zstandard

    local = content.read(member.header_offset, member.header_offset + 30)
    if len(local) < 30 or local[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile("bad local header")
    start = member.header_offset + 30 + int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
    raw = StreamContent(stream_of(content), start + member.compress_size)  # (the member's bytes end there)
    raw_stream = stream_of(raw, start)
    with tempfile.TemporaryFile(prefix="ocibridge-scan-") as out:
        reader = zstandard.ZstdDecompressor().stream_reader(raw_stream, read_across_frames=True)
        written = _copy_capped(reader, out)
        if written > MAX_DECOMPRESSED:
            raise zipfile.BadZipFile(f"decompresses past {MAX_DECOMPRESSED} bytes")
        out.flush()
        yield StreamContent(out, written)




def compressed_findings(path: str, content: RangeReadable, kind: str, where: str, depth: int,
                        judge: Judge) -> list[Finding]:
    """The decompressed stream judged by its content (a joblib dump: a pickle)."""
    if depth >= MAX_NESTING:
        return [Finding(path, "high", f"compressed streams nested more than {MAX_NESTING} deep: not scanned", where)]
    inside = f"{where} ({kind} stream)" if where else f"{kind} stream"
    fd, name = tempfile.mkstemp(prefix="ocibridge-scan-")
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                written = _decompress(stream_of(content), kind, out)
            except (OSError, EOFError, zlib.error, lzma.LZMAError) as e:
                return [Finding(path, "medium", f"{kind} stream does not decompress: {e}", where)]
        if written > MAX_DECOMPRESSED:
            return [Finding(path, "high", f"{kind} stream decompresses past {MAX_DECOMPRESSED} bytes: not scanned "
                                          "whole", where)]
        unpacked = LocalFile(name)
        try:
            return judge(path, unpacked, where=inside, depth=depth + 1)[1]
        finally:
            unpacked.close()
    finally:
        os.unlink(name)


def _decompress(stream: IO[bytes], kind: str, out: IO[bytes]) -> int:
    """Decompress into ``out``, stopping one piece past the cap: bytes written."""
    if kind == "zlib":
        decoder = zlib.decompressobj()
        written = 0
        while written <= MAX_DECOMPRESSED:
            piece = stream.read(_PIECE)
            if not piece:
                break
            data = decoder.decompress(piece, MAX_DECOMPRESSED + 1 - written)
            out.write(data)
            written += len(data)
            if decoder.unconsumed_tail:
                return written + 1
            if decoder.eof:
                break
        return written
    opened: dict[str, Any] = {"gzip": lambda: gzip.GzipFile(fileobj=stream), "bz2": lambda: bz2.BZ2File(stream),
                              "xz": lambda: lzma.LZMAFile(stream)}  # noqa: SIM115  # (opened in the with)
    with opened[kind]() as reader:
        return _copy_capped(reader, out)


def _copy_capped(reader: Any, out: IO[bytes]) -> int:
    """Copy ``reader`` into ``out`` until it ends or passes :data:`MAX_DECOMPRESSED`; the bytes
    written (past the cap: the decompression is refused by the caller)."""
    written = 0
    while written <= MAX_DECOMPRESSED:
        piece = reader.read(_PIECE)
        if not piece:
            break
        out.write(piece)
        written += len(piece)
    return written
