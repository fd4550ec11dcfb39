"""The Xet formats serve reads from uploads (specification 1.1; xet-core's ``xorb_object`` and
``metadata_shard``), read from files so memory stays one chunk whatever the upload's size.

A **xorb** is chunks, each an 8-byte header (version 0, stored length: 3 bytes little-endian,
scheme, length: 3 bytes) and its stored bytes: as they are (scheme 0), an LZ4 frame (1), or an
LZ4 frame of the bytes regrouped by position modulo 4 (2); then, optionally, a footer that
starts with ``XETBLOB`` (what a client says of its chunks: not trusted, serve recomputes them).

A **shard** is a 48-byte header (a fixed tag, version, footer size), the file info section,
the xorb info section and a footer. The file info section holds, per file, a 48-byte entry
(the file's Xet hash, flags, the number of segments), its segments (xorb hash, flags, bytes,
first chunk, chunk after the last), a verification entry per segment when flagged, and a
metadata extension (the file's SHA-256, its four 64-bit words little-endian as a Xet hash's)
when flagged; an entry whose hash is all ones ends it.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Protocol

import lz4.frame

from ocibridge.hubserver.xet import merkle
from ocibridge.hubserver.xet.chunklist import ChunkList
from ocibridge.hubserver.xet.layouts import MAX_CHUNK as MAX_CHUNK  # the largest chunk a client makes
from ocibridge.hubserver.xet.layouts import MAX_CHUNKS

HEADER = 8
#: the most chunks a xorb holds (xet-core's MAX_XORB_CHUNKS: hf_xet never makes more), which
#: bounds the headers read to find a chunk, and the chunk list kept of a xorb
MAX_XORB_CHUNKS = MAX_CHUNKS
#: the largest xorb: 64 MiB of chunks, their headers and a footer
MAX_XORB = 96 * 1024 * 1024
FOOTER_IDENT = b"XETBLOB"
SHARD_TAG = bytes([72, 70, 82, 101, 112, 111, 77, 101, 116, 97, 68, 97, 116, 97, 0, 85, 105, 103, 69, 106,
                   123, 129, 87, 131, 165, 189, 217, 92, 205, 209, 74, 169])
ENTRY = 48
BOOKEND = b"\xff" * 32
WITH_VERIFICATION = 1 << 31
WITH_METADATA_EXT = 1 << 30


class XorbReader(Protocol):
    """What a xorb's chunks are read from: a file, or a body read as it arrives (a seek forward:
    hubserver/upstream/xetfetch.py)."""

    def read(self, n: int, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...


class BadUpload(ValueError):
    """An upload that is not what the format says, or not what it claims to be."""


def _regroup(data: bytes) -> bytes:
    """Undo the byte grouping of scheme 2: group ``g`` holds the bytes at ``g`` modulo 4."""
    n = len(data)
    split, rem = divmod(n, 4)
    out = bytearray(n)
    at = 0
    for g in range(4):
        size = split + (1 if g < rem else 0)
        out[g::4] = data[at:at + size]
        at += size
    return bytes(out)


def _lz4(stored: bytes, length: int) -> bytes:
    """The LZ4 frame ``stored``, decompressed no further than one byte past ``length``: 256 KiB of
    frame can hold 60 MiB of zeros, which a chunk of at most 128 KiB never needs to be read."""
    decompressor = lz4.frame.LZ4FrameDecompressor()
    data: bytes = decompressor.decompress(stored, max_length=length + 1)
    if len(data) == length and not decompressor.eof:
        data += decompressor.decompress(b"", max_length=1)  # only the frame's end: nothing more
        if not decompressor.eof:
            raise BadUpload(f"a chunk's LZ4 frame holds more than the {length} bytes its header says")
    return data


def decompress(scheme: int, stored: bytes, length: int) -> bytes:
    """A chunk's bytes from its stored form (:class:`BadUpload` when they are not ``length`` bytes)."""
    try:
        if scheme == 0:
            data = stored
        elif scheme == 1:
            data = _lz4(stored, length)
        elif scheme == 2:
            data = _regroup(_lz4(stored, length))
        else:
            raise BadUpload(f"unknown compression scheme {scheme}")
    except RuntimeError as e:  # lz4's error for a frame that is not one
        raise BadUpload(f"a chunk's LZ4 frame does not decompress: {e}") from e
    if len(data) != length:
        raise BadUpload(f"a chunk is {len(data)} bytes, its header says {length}")
    return data


def chunk_header(head: bytes | bytearray, k: int) -> tuple[int, int, int]:
    """The stored length, scheme and length the 8-byte header of chunk ``k`` says, checked
    (:class:`BadUpload` when it is no chunk header, or the xorb holds too many chunks): the one
    reading of a header, wherever a xorb is read (a file, a body as it arrives, the build ahead)."""
    version, scheme = head[0], head[4]
    stored = int.from_bytes(head[1:4], "little")
    length = int.from_bytes(head[5:8], "little")
    if version != 0 or length > MAX_CHUNK or stored > 2 * MAX_CHUNK or length == 0:
        raise BadUpload(f"chunk {k}: not a chunk header (version {version}, {stored} bytes for {length})")
    if k >= MAX_XORB_CHUNKS:
        raise BadUpload(f"the xorb holds more than {MAX_XORB_CHUNKS} chunks")
    return stored, scheme, length


def chunks(f: XorbReader, size: int, first: int = 0, end: int | None = None,
           offsets: Sequence[int] = ()) -> Iterator[bytes]:
    """The (decompressed) chunks ``[first, end)`` of the xorb of ``size`` bytes open as ``f``;
    the chunks before ``first`` are skipped without reading their bytes, and without reading
    their headers either when ``offsets`` (:func:`chunk_offsets`) says where each starts.
    :class:`BadUpload` on a malformed chunk or one that runs past the end."""
    at, k = 0, 0
    if offsets and first:
        if first >= len(offsets):
            raise BadUpload(f"the xorb holds no chunk {first}")
        at, k = offsets[first], first
    f.seek(at)
    while at < size and (end is None or k < end):
        head = f.read(HEADER)
        if head[:len(FOOTER_IDENT)] == FOOTER_IDENT:
            if end is not None:
                raise BadUpload(f"the xorb holds no chunk {end - 1}")
            return
        if len(head) < HEADER:
            raise BadUpload("the xorb ends inside a chunk header")
        stored, scheme, length = chunk_header(head, k)
        at += HEADER + stored
        if at > size:
            raise BadUpload(f"chunk {k} runs past the end of the xorb")
        if k < first:
            f.seek(stored, 1)
        else:
            yield decompress(scheme, f.read(stored), length)
        k += 1
    if end is not None and k < end:
        raise BadUpload(f"the xorb holds no chunk {end - 1}")


def chunk_offsets(f: BinaryIO, size: int) -> array[int]:
    """Where each chunk of the xorb of ``size`` bytes open as ``f`` starts (its header; only the
    headers are read, checked as :func:`chunks` checks them); 8 bytes a chunk, as a shard's
    rebuild keeps them for every xorb it reads."""
    found = array("Q")
    at = 0
    f.seek(0)
    while at < size:
        head = f.read(HEADER)
        if head[:len(FOOTER_IDENT)] == FOOTER_IDENT:
            break
        if len(head) < HEADER or head[0] != 0:
            raise BadUpload(f"chunk {len(found)}: not a chunk header")
        if len(found) >= MAX_XORB_CHUNKS:
            raise BadUpload(f"the xorb holds more than {MAX_XORB_CHUNKS} chunks")
        found.append(at)
        at += HEADER + int.from_bytes(head[1:4], "little")
        f.seek(at)
    return found


def chunk_list(f: BinaryIO, size: int) -> ChunkList:
    """``(hash, length)`` of every chunk of the xorb open as ``f``, recomputed from its bytes."""
    return ChunkList.of((merkle.chunk_hash(data), len(data)) for data in chunks(f, size))


def verified_xorb_hash(f: BinaryIO, size: int) -> bytes:
    """The hash of the xorb open as ``f``, recomputed from every chunk's bytes."""
    hashes = chunk_list(f, size)
    if not hashes:
        raise BadUpload("the xorb holds no chunk")
    return merkle.xorb_hash(hashes)


@dataclass(frozen=True)
class Segment:
    xorb: bytes
    size: int
    first: int
    end: int


@dataclass(frozen=True)
class FileEntry:
    """A file a shard names: its Xet hash, its pieces, its SHA-256 (None: the shard has none)."""

    xet_hash: bytes
    segments: tuple[Segment, ...]
    sha256: bytes | None


def _entry(f: BinaryIO) -> bytes:
    raw = f.read(ENTRY)
    if len(raw) != ENTRY:
        raise BadUpload("the shard ends inside its file info section")
    return raw


def shard_files(f: BinaryIO) -> list[FileEntry]:
    """The files of the shard open as ``f`` (its file info section)."""
    head = f.read(ENTRY)
    if len(head) != ENTRY or head[:32] != SHARD_TAG:
        raise BadUpload("not a Xet shard (its header tag)")
    files: list[FileEntry] = []
    while True:
        raw = _entry(f)
        if raw[:32] == BOOKEND:
            return files
        flags, count = struct.unpack_from("<II", raw, 32)
        segments = []
        for _ in range(count):
            seg = _entry(f)
            _, size, first, end = struct.unpack_from("<IIII", seg, 32)
            if end <= first:
                raise BadUpload(f"a segment names chunks {first} to {end}")
            segments.append(Segment(seg[:32], size, first, end))
        if flags & WITH_VERIFICATION:
            for _ in range(count):
                _entry(f)
        sha256 = _entry(f)[:32] if flags & WITH_METADATA_EXT else None
        files.append(FileEntry(raw[:32], tuple(segments), sha256))
