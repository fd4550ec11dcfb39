"""Export a ModelPack artifact back to an ``.mlarchive``: the same files, same bytes.

Weights (``models/`` files of 1 MiB or more) are stored, everything else is deflated. Deflate
runs at 20-40 MB/s whatever the level and barely shrinks weights (0-20 %), so deflating a
1 GiB model made the export take 27 s instead of 5.5 s; the SDK reads stored entries through
Python's zipfile like any other (``compress_weights=True`` deflates them too).

Every blob is digest-verified while it streams into the zip; the zip is written under a
temporary name beside the destination, its central directory re-read and checked against what
was written, and only then renamed into place. Entries are written in a fixed order with fixed
timestamps, so exporting the same artifact twice gives the same bytes.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from ocibridge.core.backslash import refuse_in_zip
from ocibridge.core.fsutil import safe_relpath, shared_file_mode, write_sliced
from ocibridge.core.streams import Reader
from ocibridge.errors import OcibridgeError, SourceError, TooLarge
from ocibridge.kinds.archive_export import each_tar_member, manifest_to_export, read_to_end, temp_beside
from ocibridge.kinds.mlsteam.manifest import MANIFEST_NAME, parse_manifest
from ocibridge.kinds.mlsteam.reader import MAX_MANIFEST_BYTES, MODELS_DIR, read_mlarchive
from ocibridge.kinds.readback import must_read_back
from ocibridge.layers.reader import layer_mode, layer_path, open_layer
from ocibridge.oci.digest import CHUNK
from ocibridge.oci.mediatypes import LayerType, Variant, parse_layer_media_type
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import Store

#: The earliest time a zip can record; used for every entry so exports are reproducible.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
#: zlib's default, as the SDK's archive builder (``zipfile.ZIP_DEFLATED``, no level) uses.
DEFAULT_COMPRESSLEVEL = 6
#: ``models/`` files at least this large are stored (not deflated) unless asked otherwise.
STORE_WEIGHTS_FROM = 1 << 20


class NotAnMlarchive(OcibridgeError):
    """An artifact that does not hold an MLSteam archive (no valid root manifest.json)."""


@dataclass
class _Written:
    size: int
    crc: int


class _ZipWriter:
    """Writes entries with fixed metadata and records what it wrote for the final check."""

    def __init__(self, zf: zipfile.ZipFile, compresslevel: int, compress_weights: bool):
        self.zf = zf
        self.compresslevel = compresslevel
        self.compress_weights = compress_weights
        self.written: dict[str, _Written] = {}

    def _stored(self, path: str, size: int) -> bool:
        return (not self.compress_weights and size >= STORE_WEIGHTS_FROM
                and path.startswith(f"{MODELS_DIR}/"))

    def add(self, path: str, mode: int, size: int, src: Reader) -> None:
        path = safe_relpath(path, "file path in the artifact")
        refuse_in_zip(path, "file path in the artifact")  # an .mlarchive is a zip
        if path in self.written:
            raise SourceError(f"the artifact holds {path} twice")
        info = zipfile.ZipInfo(path, date_time=ZIP_EPOCH)
        if self._stored(path, size):
            info.compress_type = zipfile.ZIP_STORED
        else:
            info.compress_type = zipfile.ZIP_DEFLATED
            # A ZipInfo of our own does not inherit the ZipFile's level (3.13 aliases this name).
            info._compresslevel = self.compresslevel  # type: ignore[attr-defined]  # zipfile's per-entry level, private but stable since 3.7
        info.create_system = 3
        info.external_attr = (stat.S_IFREG | (0o755 if mode & 0o111 else 0o644)) << 16
        info.file_size = size  # lets zipfile choose zip64 up front for big files
        crc, count = 0, 0
        with self.zf.open(info, "w") as out:
            while count < size:
                data = src.read(min(CHUNK, size - count))
                if not data:
                    break
                write_sliced(out, data)
                crc = zlib.crc32(data, crc)
                count += len(data)
        if count != size:
            raise SourceError(f"{path}: got {count} bytes, expected {size}")
        self.written[path] = _Written(size, crc)


def _layer_type(desc: Descriptor) -> LayerType:
    layer_type = parse_layer_media_type(desc.mediaType)
    if layer_type is None:
        raise NotAnMlarchive(f"layer {desc.digest} has media type {desc.mediaType}, not a ModelPack one")
    return layer_type


def _read_archive_manifest(store: Store, manifest: Manifest) -> tuple[Descriptor, bytes]:
    for layer in manifest.layers:
        layer_type = parse_layer_media_type(layer.mediaType)
        if layer_type and layer_type.variant is Variant.RAW and layer_path(layer) == MANIFEST_NAME:
            if layer.size > MAX_MANIFEST_BYTES:
                raise TooLarge(f"{MANIFEST_NAME} layer is {layer.size} bytes: too large")
            with contextlib.closing(open_layer(store, layer)) as r:
                data = r.read(layer.size + 1)
                read_to_end(r)
            try:
                parse_manifest(data)
            except SourceError as e:
                raise NotAnMlarchive(f"not an MLSteam archive artifact: {e}") from None
            return layer, data
    raise NotAnMlarchive(
        f"not an MLSteam archive artifact: it has no raw {MANIFEST_NAME} layer at the root "
        "(pull it to a directory instead)"
    )


def _write_tar_layer(store: Store, desc: Descriptor, writer: _ZipWriter) -> None:
    def add(member: tarfile.TarInfo, content: Reader | None) -> None:
        if content is None:
            raise SourceError(f"{member.name}: links and devices cannot go into an mlarchive")
        writer.add(member.name, member.mode, member.size, content)

    each_tar_member(store, desc, add, SourceError)


def _write_entries(
    store: Store, manifest: Manifest, zf: zipfile.ZipFile, compresslevel: int, compress_weights: bool
) -> dict[str, _Written]:
    manifest_layer, manifest_json = _read_archive_manifest(store, manifest)
    writer = _ZipWriter(zf, compresslevel, compress_weights)
    writer.add(MANIFEST_NAME, 0o644, len(manifest_json), io.BytesIO(manifest_json))
    for layer in manifest.layers:
        if layer.digest == manifest_layer.digest and layer_path(layer) == MANIFEST_NAME:
            continue
        layer_type = _layer_type(layer)
        if layer_type.variant is Variant.RAW:
            path = layer_path(layer)
            if not path:
                raise SourceError(f"layer {layer.digest} has no file path annotation")
            with contextlib.closing(open_layer(store, layer)) as r:
                writer.add(path, layer_mode(layer), layer.size, r)
                read_to_end(r)
        else:
            _write_tar_layer(store, layer, writer)
    return writer.written


def _check_written(tmp: Path, written: dict[str, _Written]) -> None:
    """Re-read the central directory: every entry there, with the size and CRC written."""
    try:
        with zipfile.ZipFile(tmp) as zf:
            infos = {i.filename: i for i in zf.infolist()}
    except zipfile.BadZipFile as e:
        raise OcibridgeError(f"the written archive does not read back: {e}") from None
    if set(infos) != set(written):
        raise OcibridgeError("the written archive's entries differ from the artifact's files")
    for name, w in written.items():
        if infos[name].file_size != w.size or w.crc != infos[name].CRC:
            raise OcibridgeError(f"the written archive's entry {name} does not match")


def export_mlarchive(
    store: Store,
    desc: Descriptor,
    out_path: Path,
    *,
    compresslevel: int = DEFAULT_COMPRESSLEVEL,
    compress_weights: bool = False,
) -> None:
    """Rebuild the ``.mlarchive`` an artifact holds at ``out_path`` (nothing there on failure).
    Weights are stored unless ``compress_weights`` (smaller by 0-20 %, ~10x slower)."""
    out_path = Path(out_path)
    manifest = manifest_to_export(store, desc, out_path, "the archive's file name", NotAnMlarchive)
    with temp_beside(out_path, ".mlarchive") as tmp:
        with zipfile.ZipFile(
            tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=compresslevel
        ) as zf:
            written = _write_entries(store, manifest, zf, compresslevel, compress_weights)
        _check_written(tmp, written)
        must_read_back(tmp, out_path, read_mlarchive, "mlarchive")
        os.chmod(tmp, shared_file_mode())
        os.replace(tmp, out_path)
