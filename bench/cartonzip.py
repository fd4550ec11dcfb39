"""A minimal streaming writer of Carton files (zip, zstd entries = method 93, MANIFEST stored),
and the read-decompress-hash floor that a carton → layout conversion is measured against.

Only what the benchmark needs: entries under 4 GiB (no zip64), no directories, no links.
Run as ``python -m bench.cartonzip FILE.carton [OUTDIR]`` it is the floor: every entry is read,
zstd-decompressed and sha256-hashed once, in one pass, and nothing else; with OUTDIR each
entry is also written to a file there, in calls of 32 KiB (what any conversion to a layout has
to do too).
"""

from __future__ import annotations

import hashlib
import struct
import sys
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO

import zstandard

METHOD_STORED = 0
METHOD_ZSTD = 93
_CHUNK = 1024 * 1024
#: floor 2 writes in calls of this size: on these VMs 1 MiB calls cost 3-5x the kernel time
#: per GiB (1.6-1.75 s against 0.24-0.48 s, measured), a floor no tool needs to pay
_WRITE = 32 * 1024
_DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01, the zip epoch (like Carton's older writer)
_LIMIT = 0xFFFFFFFF


def _local_header(name: bytes, method: int, crc: int, csize: int, usize: int) -> bytes:
    version = 63 if method == METHOD_ZSTD else 20
    return struct.pack("<IHHHHHIIIHH", 0x04034B50, version, 0, method, 0, _DOS_DATE,
                       crc, csize, usize, len(name), 0) + name


class CartonWriter:
    """Append entries to a new zip; ``close()`` writes the central directory."""

    def __init__(self, path: Path):
        self._f: BinaryIO = path.open("wb")
        self._central: list[bytes] = []

    def add_file(self, name: str, source: Path, *, compress: bool = True) -> None:
        with source.open("rb") as src:
            self._add(name, src, compress)

    def add_bytes(self, name: str, data: bytes, *, compress: bool = True) -> None:
        import io

        self._add(name, io.BytesIO(data), compress)

    def _add(self, name: str, src: BinaryIO, compress: bool) -> None:
        raw_name = name.encode()
        method = METHOD_ZSTD if compress else METHOD_STORED
        offset = self._f.tell()
        self._f.write(_local_header(raw_name, method, 0, 0, 0))
        crc = usize = csize = 0
        writer = zstandard.ZstdCompressor(level=1).compressobj() if compress else None
        while chunk := src.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            usize += len(chunk)
            out = writer.compress(chunk) if writer else chunk
            self._f.write(out)
            csize += len(out)
        if writer:
            tail = writer.flush()
            self._f.write(tail)
            csize += len(tail)
        if usize > _LIMIT or csize > _LIMIT or offset > _LIMIT:
            raise ValueError(f"{name}: this little writer does not do zip64")
        end = self._f.tell()
        self._f.seek(offset)
        self._f.write(_local_header(raw_name, method, crc, csize, usize))
        self._f.seek(end)
        version = 63 if compress else 20
        self._central.append(
            struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, (3 << 8) | version, version, 0, method, 0,
                        _DOS_DATE, crc, csize, usize, len(raw_name), 0, 0, 0, 0, 0o100644 << 16, offset)
            + raw_name
        )

    def close(self) -> None:
        start = self._f.tell()
        for entry in self._central:
            self._f.write(entry)
        size = self._f.tell() - start
        n = len(self._central)
        self._f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, size, start, 0))
        self._f.close()


CARTON_TOML = """spec_version = 1
model_name = 'bench'
short_description = 'Synthetic weights for benchmarks.'

[runner]
runner_name = 'torchscript'
required_framework_version = '>=2.0.0'
runner_compat_version = 1
"""


def write_carton(path: Path, model_root: Path, files: list[str]) -> None:
    """A Carton whose ``model/`` holds ``files`` (from ``model_root``), with a correct MANIFEST."""
    manifest: dict[str, str] = {}
    writer = CartonWriter(path)
    writer.add_bytes("carton.toml", CARTON_TOML.encode())
    manifest["carton.toml"] = hashlib.sha256(CARTON_TOML.encode()).hexdigest()
    index = b"tensor = []\n"
    writer.add_bytes("tensor_data/index.toml", index)
    manifest["tensor_data/index.toml"] = hashlib.sha256(index).hexdigest()
    for rel in files:
        writer.add_file(f"model/{rel}", model_root / rel)
        manifest[f"model/{rel}"] = _sha256_file(model_root / rel)
    lines = "".join(f"{k}={manifest[k]}\n" for k in sorted(manifest, key=str.encode))
    writer.add_bytes("MANIFEST", lines.encode(), compress=False)
    writer.close()


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def read_and_hash(path: Path, outdir: Path | None = None) -> dict[str, str]:
    """The floor: one pass of read + decompress + sha256 over every entry (+ write to outdir)."""
    out = {}
    with zipfile.ZipFile(path) as z, path.open("rb") as f:
        for info in z.infolist():
            f.seek(info.header_offset)
            header = f.read(30)
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            f.seek(name_len + extra_len, 1)
            h = hashlib.sha256()
            left = info.compress_size
            dec = zstandard.ZstdDecompressor().decompressobj() if info.compress_type == METHOD_ZSTD else None
            sink = (outdir / f"{len(out)}.out").open("wb") if outdir else None
            while left:
                chunk = f.read(min(_CHUNK, left))
                if not chunk:
                    raise ValueError(f"{info.filename}: truncated")
                left -= len(chunk)
                data = dec.decompress(chunk) if dec else chunk
                h.update(data)
                if sink:
                    view = memoryview(data)  # in calls of 32 KiB, as ocibridge and bench.rawpull write
                    for at in range(0, len(view), _WRITE):
                        sink.write(view[at:at + _WRITE])
            if sink:
                sink.close()
            out[info.filename] = h.hexdigest()
    return out


if __name__ == "__main__":
    target = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    if target:
        target.mkdir(parents=True, exist_ok=True)
    for name, digest in read_and_hash(Path(sys.argv[1]), target).items():
        print(f"{name}={digest}")
