"""Reproducible layer bytes: tar streams with fixed metadata, gzip and zstd with fixed settings.

Everything here is a generator of chunks that can be run again and gives the same bytes:
entries in byte order of their paths, mtime 0, uid/gid 0, empty uname/gname, normalised
modes, PAX headers only where a field does not fit ustar. gzip has no timestamp, no name and
OS byte 255; zstd runs at a fixed level with no checksum-dependent options. (Different zlib
or libzstd versions could in principle emit different compressed bytes; raw and plain tar
layers, the defaults, never depend on a compressor.)
"""

from __future__ import annotations

import io
import struct
import tarfile
import zlib
from collections.abc import Iterable, Iterator
from typing import Final

import zstandard

from ocibridge.model.package import ModelFile
from ocibridge.oci.digest import CHUNK
from ocibridge.oci.mediatypes import Variant

TAR_FORMAT: Final = tarfile.PAX_FORMAT
BLOCK = tarfile.BLOCKSIZE
RECORD = tarfile.RECORDSIZE
GZIP_LEVEL = 6
ZSTD_LEVEL = 3


def tar_member(f: ModelFile) -> tarfile.TarInfo:
    info = tarfile.TarInfo(f.path)
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = f.mode
    if f.link_target is not None:
        info.type = tarfile.SYMTYPE
        info.linkname = f.link_target
        info.size = 0
    else:
        info.type = tarfile.REGTYPE
        info.size = f.size
    return info


def tar_chunks(files: Iterable[ModelFile]) -> Iterator[bytes]:
    """A tar archive of ``files`` in byte order of their paths, streamed in chunks."""
    written = 0
    for f in sorted(files, key=lambda x: x.path.encode()):
        info = tar_member(f)
        header = info.tobuf(TAR_FORMAT, "utf-8", "surrogateescape")
        yield header
        written += len(header)
        if info.type != tarfile.REGTYPE:
            continue
        yield from _exact_content(f)
        pad = -f.size % BLOCK
        if pad:
            yield b"\0" * pad
        written += f.size + pad
    end = b"\0" * (2 * BLOCK)
    written += len(end)
    end += b"\0" * (-written % RECORD)
    yield end


def tar_offsets(files: Iterable[ModelFile]) -> dict[str, int]:
    """Where each regular file's content starts in :func:`tar_chunks`' stream of ``files``: known
    from the headers alone (paths, sizes, modes, links), so a file is read back by a range of
    the layer without the layer's bytes at hand."""
    offsets: dict[str, int] = {}
    at = 0
    for f in sorted(files, key=lambda x: x.path.encode()):
        info = tar_member(f)
        at += len(info.tobuf(TAR_FORMAT, "utf-8", "surrogateescape"))
        if info.type != tarfile.REGTYPE:
            continue
        offsets[f.path] = at
        at += f.size + -f.size % BLOCK
    return offsets


def _exact_content(f: ModelFile) -> Iterator[bytes]:
    """The file's ``f.size`` bytes, or an error if it shrank or grew since it was listed.

    Each read asks for one byte more than is left, so growth shows without a separate read;
    a buffered file (what a file on disk is) returns less than asked only at its end, so a
    small file takes one read call, not two.
    """
    remaining = f.size
    with f.open() as src:
        short_read_is_eof = isinstance(src, io.BufferedIOBase)
        while True:
            want = min(CHUNK, remaining + 1)
            data = src.read(want)
            if len(data) > remaining:
                raise OSError(f"{f.path}: file grew while packing")
            remaining -= len(data)
            if data:
                yield data
            if not data or (short_read_is_eof and len(data) < want):
                break
    if remaining:
        raise OSError(f"{f.path}: file shrank while packing")


def gzip_chunks(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """RFC 1952 gzip with a fixed header (no mtime, no name, OS unknown)."""
    yield b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    deflate = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, 9)
    crc = 0
    size = 0
    for chunk in chunks:
        crc = zlib.crc32(chunk, crc)
        size += len(chunk)
        out = deflate.compress(chunk)
        if out:
            yield out
    yield deflate.flush() + struct.pack("<II", crc & 0xFFFFFFFF, size & 0xFFFFFFFF)


def zstd_chunks(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """A single zstd frame at a fixed level, without content size (streams have none)."""
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=False)
    obj = compressor.compressobj()
    for chunk in chunks:
        out = obj.compress(chunk)
        if out:
            yield out
    yield obj.flush()


def compress(variant: Variant, chunks: Iterable[bytes]) -> Iterable[bytes]:
    if variant is Variant.TAR_GZIP:
        return gzip_chunks(chunks)
    if variant is Variant.TAR_ZSTD:
        return zstd_chunks(chunks)
    return chunks


def file_chunks(f: ModelFile) -> Iterator[bytes]:
    with f.open() as src:
        while data := src.read(CHUNK):
            yield data
