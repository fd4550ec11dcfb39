"""Export a ModelPack artifact back to a ``.carton`` whose MANIFEST bytes (so model hash) equal
the original's, entries compressed as the Carton library does (zstd, MANIFEST stored).

Every layer is digest-verified while it streams; every file is hashed while it is compressed
into the zip and compared with MANIFEST; every MANIFEST path must be written exactly once. The
zip goes to a temporary name beside the destination, its central directory and MANIFEST are
read back and checked against what was written, and only then is it renamed into place.
Memory stays constant: one chunk of one layer at a time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

from ocibridge.core.fsutil import link_stays_inside, safe_relpath, shared_file_mode
from ocibridge.core.streams import Reader
from ocibridge.core.zipbound import METHOD_STORED
from ocibridge.errors import OcibridgeError, TooLarge, UnsafePath
from ocibridge.kinds.archive_export import each_tar_member, manifest_to_export, read_to_end, temp_beside
from ocibridge.kinds.carton.errors import CartonError, CartonMismatch, NotACarton
from ocibridge.kinds.carton.manifest import LINKS_NAME, MANIFEST_NAME, TOML_NAME, CartonManifest, parse_manifest
from ocibridge.kinds.carton.mapping import ANNOTATION_MODEL_HASH
from ocibridge.kinds.carton.reader import read_carton
from ocibridge.kinds.carton.zipread import DEFAULT_LIMITS, EntryReader, scan_entries
from ocibridge.kinds.carton.zipwrite import ZipWriter
from ocibridge.kinds.readback import must_read_back
from ocibridge.layers.reader import layer_mode, layer_path, open_layer
from ocibridge.oci.digest import CHUNK
from ocibridge.oci.mediatypes import Variant, parse_layer_media_type
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import Store


def _chunks(reader: Reader, size: int | None = None) -> Iterator[bytes]:
    remaining = size
    while remaining is None or remaining > 0:
        data = reader.read(CHUNK if remaining is None else min(CHUNK, remaining))
        if not data:
            break
        if remaining is not None:
            remaining -= len(data)
        yield data


class _Hashing:
    """Passes chunks through, hashing them, so a file is hashed as it is compressed."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks, self.sha = chunks, hashlib.sha256()

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            self.sha.update(chunk)
            yield chunk


class _CartonWriter:
    """Adds files to the zip, checking each against MANIFEST as it goes."""

    def __init__(self, zip_writer: ZipWriter, manifest: CartonManifest):
        self.zip, self.manifest = zip_writer, manifest
        self.links: dict[str, str] = {}
        self._written: set[str] = set()

    def expected(self, path: str) -> str:
        """The sha256 MANIFEST gives ``path`` (normal: ``model/x``, not ``./model/x``)."""
        if path not in self.manifest.entries:
            raise NotACarton(f"the artifact holds {path!r}, which its MANIFEST does not list")
        return self.manifest.entries[path]

    def _once(self, path: str) -> None:
        """Refuse a second entry of one name (two layers holding one file), before the zip
        writer's own assertion would."""
        if path in self._written:
            raise NotACarton(f"the artifact holds {path!r} twice")
        self._written.add(path)

    def add_file(self, path: str, chunks: Iterator[bytes], size: int, mode: int) -> None:
        """A file at ``path``, already normalised (:func:`safe_relpath`): the zip entry's name."""
        sha = self.expected(path)
        self._once(path)
        hashing = _Hashing(chunks)
        self.zip.add(path, iter(hashing), size_hint=size, mode=mode)
        if hashing.sha.hexdigest() != sha:
            raise CartonMismatch(f"{path}: content sha256 {hashing.sha.hexdigest()} does not match MANIFEST ({sha})")

    def add_link(self, path: str, target: str) -> None:
        self.expected(path)
        if not path.startswith("model/") or not link_stays_inside(path, target, "model"):
            raise UnsafePath(f"symlink {path!r} → {target!r} points outside model/")
        self._once(path)
        self.links[path] = target
        self.zip.add_symlink(path, target)


def _find_manifest(store: Store, manifest: Manifest) -> tuple[Descriptor, CartonManifest]:
    found: dict[str, Descriptor] = {}
    for layer in manifest.layers:
        layer_type = parse_layer_media_type(layer.mediaType)
        if layer_type and layer_type.variant is Variant.RAW and layer_path(layer) in (MANIFEST_NAME, TOML_NAME):
            found[layer_path(layer) or ""] = layer
    for name in (MANIFEST_NAME, TOML_NAME):
        if name not in found:
            raise NotACarton(
                f"not a Carton artifact: it has no raw {name} layer at the root (pull it to a directory instead)"
            )
    layer = found[MANIFEST_NAME]
    if layer.size > DEFAULT_LIMITS.max_small_file:
        raise TooLarge(f"{MANIFEST_NAME} layer is {layer.size} bytes: too large")
    with contextlib.closing(open_layer(store, layer)) as r:
        data = r.read(layer.size + 1)
        read_to_end(r)
    try:
        parsed = parse_manifest(data)
    except (CartonError, UnsafePath) as e:
        raise NotACarton(f"not a Carton artifact: {e}") from None
    claimed = (manifest.annotations or {}).get(ANNOTATION_MODEL_HASH)
    if claimed and claimed != parsed.model_hash:
        raise CartonMismatch(f"{MANIFEST_NAME} has sha256 {parsed.model_hash}, the artifact says {claimed}")
    return layer, parsed


def _write_tar_layer(store: Store, desc: Descriptor, writer: _CartonWriter) -> None:
    def add(member: tarfile.TarInfo, content: Reader | None) -> None:
        # './model/x' (as `tar -C DIR .` writes it) is model/x, as tar reads it; '..' and
        # absolute names are refused here, naming the entry as the layer holds it
        path = safe_relpath(member.name, "tar entry")
        if member.issym():
            writer.add_link(path, member.linkname)
        elif content is not None:
            writer.add_file(path, _chunks(content, member.size), member.size, member.mode)
        else:
            raise CartonError(f"{path}: hard links and devices cannot go into a carton")

    each_tar_member(store, desc, add, CartonError)


def _write_entries(store: Store, manifest: Manifest, zw: ZipWriter) -> CartonManifest:
    manifest_layer, carton_manifest = _find_manifest(store, manifest)
    writer = _CartonWriter(zw, carton_manifest)
    for layer in manifest.layers:
        layer_type = parse_layer_media_type(layer.mediaType)
        if layer_type is None:
            raise NotACarton(f"layer {layer.digest} has media type {layer.mediaType}, not a ModelPack one")
        if layer_type.variant is Variant.RAW:
            named = layer_path(layer)
            if not named:
                raise NotACarton(f"layer {layer.digest} has no file path annotation")
            path = safe_relpath(named, "file path in the artifact")
            if path in (MANIFEST_NAME, LINKS_NAME):
                continue
            sha = writer.expected(path)
            if layer.digest != "sha256:" + sha:
                raise CartonMismatch(f"{path}: layer digest {layer.digest} does not match MANIFEST ({sha})")
            with contextlib.closing(open_layer(store, layer)) as r:
                writer.add_file(path, _chunks(r), layer.size, layer_mode(layer))
                read_to_end(r)
        else:
            _write_tar_layer(store, layer, writer)
    missing = sorted(set(carton_manifest.entries) - {e.name for e in zw.entries})
    if missing:
        raise NotACarton(f"the artifact lacks {missing[0]!r}, which its MANIFEST lists ({len(missing)} missing)")
    zw.add(MANIFEST_NAME, iter([carton_manifest.data]), method=METHOD_STORED)
    return carton_manifest


def _check_written(tmp: Path, zw: ZipWriter, carton_manifest: CartonManifest) -> None:
    """Read the central directory back: the entries written, with their sizes and CRCs, and the
    MANIFEST entry byte-identical to the artifact's."""
    try:
        entries = {entry.path: entry for entry in scan_entries(tmp)}
    except (CartonError, UnsafePath) as error:
        raise OcibridgeError(f"the written carton does not read back: {error}") from None
    written = {w.name: w for w in zw.entries}
    if set(entries) != set(written):
        raise OcibridgeError("the written carton's entries differ from what was written")
    for name, w in written.items():
        e = entries[name]
        if (e.size, e.compress_size, e.crc, e.method) != (w.size, w.compress_size, w.crc, w.method):
            raise OcibridgeError(f"the written carton's entry {name} does not read back as written")
    with EntryReader(tmp, entries[MANIFEST_NAME], expect_sha256=carton_manifest.model_hash) as r:
        read_to_end(r)


def export_carton(store: Store, desc: Descriptor, out_path: Path) -> None:
    """Rebuild the ``.carton`` an artifact holds at ``out_path`` (nothing there on failure)."""
    out_path = Path(out_path)
    manifest = manifest_to_export(store, desc, out_path, "the carton's file name", NotACarton)
    with temp_beside(out_path, ".carton") as tmp:
        with open(tmp, "wb") as out:
            zw = ZipWriter(out)
            carton_manifest = _write_entries(store, manifest, zw)
            zw.close()
        _check_written(tmp, zw, carton_manifest)
        must_read_back(tmp, out_path, lambda path: read_carton(path, eager_verify_bytes=0), "carton")
        os.chmod(tmp, shared_file_mode())
        os.replace(tmp, out_path)
