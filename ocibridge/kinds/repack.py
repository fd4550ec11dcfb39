"""Layers a target family cannot hold as they are, rewritten as it needs them.

Docker model layers are plain tar: a ModelKit packed with ``kit pack --compression gzip|zstd``
has ``tar+gzip`` / ``tar+zstd`` layers. Those are decompressed (bounded as pull bounds them, the
result checked against the diffId the source states); the part then points at the new blob,
whose digest is its diffId. Ollama runs a GGUF that is a blob of its own: a weight tar layer
(a ModelKit's ``model/`` directory) is unpacked into one raw part per file. New blobs are
staged in a temporary directory that goes with the conversion. Every rewrite is reported as a
change: the round trip cannot give the old blob back (compression is not reproducible byte for
byte, and a tar's headers are not kept).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any, BinaryIO, Protocol, runtime_checkable

from ocibridge.core.fsutil import TEMP_PREFIX, is_root_entry, safe_relpath, write_sliced
from ocibridge.core.streams import Reader, open_tar_stream
from ocibridge.errors import NotFound, OcibridgeError, SourceError
from ocibridge.kinds.family import Reading
from ocibridge.kinds.neutral import Loss, Part
from ocibridge.layers.reader import LayerReader, open_layer
from ocibridge.layers.tarwalk import tar_members
from ocibridge.model.package import normalise_mode
from ocibridge.oci.digest import CHUNK, VerifyingReader
from ocibridge.oci.mediatypes import Variant
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import Store

_PLAIN = {Variant.TAR_GZIP: Variant.TAR, Variant.TAR_ZSTD: Variant.TAR}
_COMPRESSION = {Variant.TAR_GZIP: "gzip", Variant.TAR_ZSTD: "zstd"}


@runtime_checkable
class HoldsOnly(Protocol):
    """A family that cannot carry some layers as they are (Docker: compressed tar layers;
    Ollama: a GGUF inside a tar)."""

    def rewrite(self, part: Part) -> Variant | None:
        """None when ``part``'s blob can be written unchanged, else the variant it must become
        (``TAR``: decompressed; ``RAW``: unpacked into one part per file)."""
        ...


def repack(reading: Reading, target: HoldsOnly, title: str) -> tuple[Reading, list[Loss]]:
    """``reading`` with every part ``target`` cannot hold rewritten; (the reading, the changes)."""
    todo = {id(p): want for p in reading.view.parts if (want := target.rewrite(p)) is not None}
    if not todo:
        return reading, []
    staged = StagedBlobs(reading.blobs)
    changes: list[Loss] = []
    parts: list[Part] = []
    try:
        for part in reading.view.parts:
            want = todo.get(id(part))
            if want is None:
                parts.append(part)
            elif want is Variant.TAR and part.variant in _PLAIN:
                before, was = part.blob, part.variant.value.split("+")[1]
                part.blob, part.variant = staged.decompress(part), Variant.TAR
                parts.append(part)
                changes.append(Loss(f"layers[{part.path}].compression",
                                    f"{was} removed: {before.digest} is now {part.blob.digest}", False))
            elif want is Variant.RAW and part.variant.is_tar:
                files, skipped = staged.unpack(part)
                parts.extend(files)
                changes.append(Loss(f"layers[{part.path}].tar",
                                    f"unpacked into {len(files)} raw layer(s): {', '.join(f.path for f in files)}",
                                    False))
                reading.losses.extend(skipped)
            else:
                raise SourceError(f"{part.path}: a {part.variant.value} layer cannot be written as a {title}")
    except BaseException:
        staged.remove()
        raise
    reading.view.parts = parts
    return Reading(reading.view, staged, reading.losses), changes


def _layer(store: Store, part: Part) -> LayerReader:
    """``part``'s content decoded as its variant says, bounded, its blob verified at the end."""
    return open_layer(store, part.blob, compression=_COMPRESSION.get(part.variant))


class _Hashing:
    """Hashes what is read through it (a tar layer's uncompressed bytes: its diffId)."""

    def __init__(self, raw: Reader, h: Any):
        self._raw, self._h = raw, h

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self._h.update(data)
        return data


class StagedBlobs:
    """A read-only store: blobs made by a conversion from files of a staging directory (removed
    with this object), every other blob from the source store."""

    def __init__(self, inner: Store):
        self.inner = inner
        self.staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.staging), True)
        self._files: dict[str, Path] = {}

    def remove(self) -> None:
        self._finalizer()

    def decompress(self, part: Part) -> Descriptor:
        """Stage ``part``'s blob decompressed; its descriptor (a tar's media type is the caller's)."""
        out = self.staging / f"{len(self._files)}.tar"
        h = hashlib.sha256()
        size = 0
        with _layer(self.inner, part) as stream, open(out, "wb") as sink:  # verified at its end
            while chunk := stream.read(CHUNK):
                h.update(chunk)
                write_sliced(sink, chunk)
                size += len(chunk)
        digest = "sha256:" + h.hexdigest()
        if part.diff_id not in (digest, part.blob.digest):
            raise SourceError(f"{part.path}: layer {part.blob.digest} decompresses to {digest}, "
                              f"but its diffId is {part.diff_id}")
        self._files[digest] = out
        return Descriptor(mediaType=part.blob.mediaType.rsplit("+", 1)[0], digest=digest, size=size)

    def unpack(self, part: Part) -> tuple[list[Part], list[Loss]]:
        """Stage every regular file of a tar part as a raw blob; (the new parts, the links and
        other entries that cannot be raw layers, as losses)."""
        files: list[Part] = []
        lost: list[Loss] = []
        h_tar = hashlib.sha256()
        with _layer(self.inner, part) as layer:  # decoded, bounded, verified at its end
            stream = _Hashing(layer, h_tar)
            with open_tar_stream(stream) as tar:
                for member in tar_members(tar, what=f"{part.path}: tar layer"):
                    if is_root_entry(member.name) or member.isdir():
                        continue
                    path = safe_relpath(member.name.rstrip("/"), "tar entry")
                    if not member.isfile():
                        lost.append(Loss(f"file {path}", "a link in a tar layer (raw layers hold files only)",
                                         False))
                        continue
                    source = tar.extractfile(member)
                    assert source is not None
                    blob = self._stage(source, member.size, path)
                    files.append(Part(blob, part.kind, Variant.RAW, path, blob.digest,
                                      mode=normalise_mode(member.mode)))
            while stream.read(CHUNK):  # to the end: the tar's digest, and the blob verified
                pass
        tar_digest = "sha256:" + h_tar.hexdigest()
        if part.diff_id not in (tar_digest, part.blob.digest):
            raise SourceError(f"{part.path}: layer {part.blob.digest} holds a tar of digest {tar_digest}, "
                              f"but its diffId is {part.diff_id}")
        if not files:
            raise SourceError(f"{part.path}: the tar layer holds no file")
        return files, lost

    def _stage(self, source: Reader, size: int, what: str) -> Descriptor:
        out = self.staging / f"{len(self._files)}.raw"
        h = hashlib.sha256()
        written = 0
        with open(out, "wb") as sink:
            while written < size and (chunk := source.read(min(CHUNK, size - written))):
                h.update(chunk)
                write_sliced(sink, chunk)
                written += len(chunk)
        if written != size:
            raise SourceError(f"{what}: the tar layer ends inside the file")
        digest = "sha256:" + h.hexdigest()
        self._files[digest] = out
        return Descriptor(mediaType="application/octet-stream", digest=digest, size=size)

    def describe(self) -> str:
        return f"{self.inner.describe()} (repacked)"

    def exists(self, desc: Descriptor) -> bool:
        return desc.digest in self._files or self.inner.exists(desc)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        path = self._files.get(desc.digest)
        if path is None:
            return self.inner.open_blob(desc)
        raw = open(path, "rb")  # noqa: SIM115 - returned to the caller, verified at its end
        return VerifyingReader(raw, desc.digest, desc.size)  # type: ignore[return-value]  # as the other stores

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        if desc.digest in self._files:
            raise OcibridgeError(f"{desc.digest} is a layer, not a manifest or config")
        return self.inner.fetch_bytes(desc)

    def resolve(self, reference: str) -> Descriptor:
        raise NotFound(f"{self.describe()} has no reference {reference}")

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        return []

    def tags(self) -> list[str]:
        return []


