"""The builder: a model package becomes a ModelPack artifact, served by a read-only store.

The artifact is planned (digests computed, reading each file once, or not at all where the
source already knows a file's sha256) and then served on demand by :class:`ArtifactStore`, so
that pushing to a layout or a registry is the one graph copy and nothing is staged on disk.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import hashlib
import io
import json
import posixpath
import threading
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO

from ocibridge.chunks import chunkcache
from ocibridge.chunks.chunking import ChunkingReader, ChunkPolicy, chunk_table
from ocibridge.chunks.chunktable import ChunkTable, LayerChunks, binding_annotations
from ocibridge.core.preload import loading_at_first_read
from ocibridge.core.streams import IterReader
from ocibridge.errors import DigestMismatch, NotFound, SourceError
from ocibridge.model import digestcache
from ocibridge.model.package import ModelFile, ModelPackage, env_epoch
from ocibridge.model.packing import compress, file_chunks, tar_chunks
from ocibridge.model.paths import ArtifactPaths
from ocibridge.oci.digest import is_digest, sha256_bytes, verified
from ocibridge.oci.empty import EMPTY_DIGEST, EMPTY_JSON, empty_layer
from ocibridge.oci.mediatypes import ANNOTATION_TITLE, OCI_MANIFEST, Family, Kind, Variant
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import PendingBlob
from ocibridge.transfer import sampleindex
from ocibridge.transfer.progress_events import file_key, layer_key

#: Non-weight kinds with more files than this are grouped into one tar layer per kind, so a
#: model with thousands of small files does not become a manifest with thousands of layers.
AUTO_GROUP_THRESHOLD = 64
EPOCH_ZERO = "1970-01-01T00:00:00Z"
ARTIFACT_TAG = "artifact"
#: the config model (pydantic: much of a push's start-up), loaded while pending files are sent
CONFIG_MODULE = "ocibridge.model.config"


@dataclass(frozen=True)
class BuildOptions:
    """How a model's files become layers and what the manifest says. Frozen, its mappings and
    set read-only copies of what was given: it sits inside the frozen ``PushOptions``, and one
    value may serve many pushes (in threads too), so a change is a new value
    (``dataclasses.replace``), never an edit every holder of the old one would see."""

    family: Family = Family.CNAI
    variants: Mapping[Kind, Variant] = field(default_factory=dict)  # default raw for every kind
    group: AbstractSet[Kind] = field(default_factory=frozenset)  # kinds packed into one tar layer each
    auto_group: bool = True
    created_at: str | None = None  # RFC 3339; see created_now()
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: a model of no files is built (its one layer the empty descriptor: oci/empty.py), not refused:
    #: serve's commit that deletes a repository's last file; push of an empty directory stays refused
    allow_empty: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "variants", MappingProxyType(dict(self.variants)))
        object.__setattr__(self, "group", frozenset(self.group))
        object.__setattr__(self, "annotations", MappingProxyType(dict(self.annotations)))


def created_now() -> str:
    """``createdAt`` honouring SOURCE_DATE_EPOCH, for users who ask for a creation time."""
    epoch = env_epoch()
    moment = (
        _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc)
        if epoch is not None
        else _dt.datetime.now(_dt.timezone.utc)
    )
    return moment.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class PlannedLayer:
    files: list[ModelFile]
    kind: Kind
    variant: Variant
    path: str  # the filepath annotation
    descriptor: Descriptor | None = None
    diff_id: str | None = None

    def progress_key(self) -> Descriptor:
        """Its stand-in for progress reports while nothing is hashed yet (path-keyed)."""
        if self.variant is Variant.RAW:
            return file_key(self.files[0].path, self.files[0].size)
        return layer_key(self.path, _tar_estimate([f.size for f in self.files]), self.kind.value)

    def chunks(self) -> Iterator[bytes]:
        if self.variant is Variant.RAW:
            return file_chunks(self.files[0])
        return iter(compress(self.variant, tar_chunks(self.files)))


def _tar_estimate(sizes: list[int]) -> int:
    """A tar of files of these sizes: a 512-byte header each, content padded to 512, 1 KiB end."""
    return sum(512 + -(-size // 512) * 512 for size in sizes) + 1024


def _file_metadata(name: str, mode: int, size: int, typeflag: int) -> str:
    meta = {
        "name": name,
        "mode": mode,
        "uid": 0,
        "gid": 0,
        "size": size,
        "mtime": EPOCH_ZERO,
        "typeflag": typeflag,
    }
    return json.dumps(meta, separators=(",", ":"))


def _common_dir(paths: list[str]) -> str:
    dirs = [posixpath.dirname(p) for p in paths]
    common = posixpath.commonpath(dirs) if all(dirs) else ""
    return common or "."


def plan_layers(package: ModelPackage, options: BuildOptions) -> list[PlannedLayer]:
    """Group files into layers: raw one-per-file by default, tar where asked or needed."""
    seen: set[str] = set()
    for f in package.files:
        if f.path in seen:
            raise SourceError(f"duplicate path in model: {f.path}")
        seen.add(f.path)
    counts: dict[Kind, int] = {}
    for f in package.files:
        counts[f.kind] = counts.get(f.kind, 0) + 1

    groups: dict[tuple[str, Kind, Variant], list[ModelFile]] = {}
    layers: list[PlannedLayer] = []
    for f in package.files:
        variant = f.variant or options.variants.get(f.kind, Variant.RAW)
        grouped = f.layer is not None or f.kind in options.group or (
            options.auto_group and f.kind is not Kind.WEIGHT and counts[f.kind] > AUTO_GROUP_THRESHOLD
        )
        if f.link_target is not None or (grouped and f.layer is None):
            grouped = True
        if grouped:
            if variant is Variant.RAW:
                variant = Variant.TAR
            key = (f.layer or f"kind:{f.kind.value}", f.kind, variant)
            groups.setdefault(key, []).append(f)
        else:
            layers.append(PlannedLayer([f], f.kind, variant, f.path))
    for (_, kind, variant), files in groups.items():
        files.sort(key=lambda x: x.path.encode())
        path = files[0].path if len(files) == 1 else _common_dir([x.path for x in files])
        layers.append(PlannedLayer(files, kind, variant, path))
    layers.sort(key=lambda layer: (layer.path.encode(), layer.kind.value))
    return layers


def _describe_layer(layer: PlannedLayer, family: Family) -> None:
    """Compute digest, size and diffId of a layer, reading its content at most once."""
    from ocibridge.oci.mediatypes import layer_media_type

    media_type = layer_media_type(layer.kind, layer.variant, family)
    single = layer.files[0]
    annotations = {family.filepath_key: layer.path}
    if layer.variant is Variant.RAW:
        if single.digest and is_digest(single.digest):
            digest, size = single.digest, single.size
        else:
            h = hashlib.sha256()
            size = 0
            for chunk in file_chunks(single):
                h.update(chunk)
                size += len(chunk)
            digest = "sha256:" + h.hexdigest()
            if single.source_path is not None and size == single.size:
                _remember(single.source_path, size, digest)
        if size != single.size:
            raise SourceError(f"{single.path}: size changed while reading ({single.size} → {size})")
        diff_id = digest
        annotations[family.metadata_key] = _file_metadata(
            posixpath.basename(single.path), single.mode, single.size, 48
        )
        annotations[ANNOTATION_TITLE] = single.path
    else:
        outer = hashlib.sha256()
        inner = hashlib.sha256()
        size = 0

        def tee() -> Iterator[bytes]:
            for chunk in tar_chunks(layer.files):
                inner.update(chunk)
                yield chunk

        for chunk in compress(layer.variant, tee()):
            outer.update(chunk)
            size += len(chunk)
        digest = "sha256:" + outer.hexdigest()
        diff_id = "sha256:" + inner.hexdigest()
        if len(layer.files) == 1 and single.link_target is None:
            meta = _file_metadata(posixpath.basename(single.path), single.mode, single.size, 48)
        else:
            meta = _file_metadata(posixpath.basename(layer.path), 0o755, 0, 53)
        annotations[family.metadata_key] = meta
    annotations[family.untested_key] = "false"
    layer.descriptor = Descriptor(
        mediaType=media_type, digest=digest, size=size, annotations=annotations
    )
    layer.diff_id = diff_id


class ArtifactStore:
    """A read-only store serving one freshly built artifact: config, layers and manifest.

    Layer bytes are produced again on demand; the destination's verification catches a source
    file that changed between planning and copying.
    """

    def __init__(self, manifest: Manifest, config_bytes: bytes, layers: list[PlannedLayer],
                 table: ChunkTable | None = None):
        self.manifest = manifest
        self.table = table  # the chunk table the manifest binds, served as a small blob
        self._small = {manifest.config.digest: config_bytes, EMPTY_DIGEST: EMPTY_JSON}  # an empty model's layer
        if table is not None:
            self._small[table.descriptor().digest] = table.to_bytes()
        self.manifest_bytes = manifest.to_json_bytes()
        self.descriptor = Descriptor.for_bytes(OCI_MANIFEST, self.manifest_bytes)
        self.descriptor.artifactType = manifest.artifactType
        self.config_bytes = config_bytes
        self._layers = {layer.descriptor.digest: layer for layer in layers if layer.descriptor}

    def describe(self) -> str:
        return "built artifact"

    def exists(self, desc: Descriptor) -> bool:
        return desc.digest in self._layers or desc.digest in self._small or desc.digest == self.descriptor.digest

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        if desc.digest == self.descriptor.digest:
            return self.manifest_bytes
        if desc.digest in self._small:
            return self._small[desc.digest]
        raise NotFound(f"built artifact has no small blob {desc.digest}")

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        """The layer made again from its files, verified as every store's blobs are (a file
        changed since it was hashed fails at EOF); the destination then need not hash again."""
        layer = self._layers.get(desc.digest)
        if layer is None:
            return io.BytesIO(self.fetch_bytes(desc))
        # a raw file's own reader (no extra copy of each chunk), or the tar made again
        raw = layer.files[0].open() if layer.variant is Variant.RAW else IterReader(layer.chunks())
        # a source that checks its own content (a carton entry against MANIFEST) is not hashed twice
        return verified(raw, desc.digest, desc.size, what=f"{layer.path}: layer")  # type: ignore[return-value]  # a verifying read()-stream where the Store protocol names BinaryIO

    def resolve(self, reference: str) -> Descriptor:
        if reference in (ARTIFACT_TAG, self.descriptor.digest):
            return self.descriptor
        raise NotFound(f"built artifact has no reference {reference}")

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        return []

    def tags(self) -> list[str]:
        return [ARTIFACT_TAG]


def _vouched(f: ModelFile) -> Descriptor | None:
    """What ``f``'s own stream checks, when it checks anything (``ModelFile.checked``)."""
    if f.checked and f.digest is not None:
        return Descriptor(mediaType="application/octet-stream", digest=f.digest, size=f.size)
    return None


class PlannedArtifact:
    """The artifact a push will build, as a read-only store that builds it on first read.

    Before that, its raw files whose digest nobody knows (or whose chunk table is wanted and not
    cached: :meth:`_unchunked`) are :class:`PendingBlobs`: a copy into
    a store that ingests sends them while hashing them and settles their digests here, so the
    artifact built afterwards names them without reading any file a second time. Progress
    reports name such a file by its path-keyed stand-in until its digest is known.
    """

    def __init__(self, package: ModelPackage, options: BuildOptions | None = None,
                 chunks: ChunkPolicy | None = None, chunked: Mapping[str, LayerChunks] | None = None):
        self.package = package
        self.options = options or BuildOptions()
        self.chunks = chunks  # None: no chunk table
        self.table: ChunkTable | None = None  # the table the manifest binds, once built
        self._built: ArtifactStore | None = None
        self._lock = threading.Lock()
        self._readers: dict[str, ChunkingReader] = {}  # by file path: the last reader opened
        #: by digest, in ``chunks.chunk_size`` pieces: chunks made by the hashing read, or given
        #: (``chunked``: a file's table made when its bytes were verified, model/known.py)
        self._chunked: dict[str, LayerChunks] = dict(chunked or {})
        self._readers_lock = threading.Lock()

    def pending_blobs(self) -> list[PendingBlob]:
        files = [layer.files[0] for layer in plan_layers(self.package, self.options)
                 if layer.variant is Variant.RAW and (layer.files[0].digest is None or self._unchunked(layer.files[0]))]
        # the config is built once they are settled: its model loads while they go out
        return [PendingBlob(file_key(f.path, f.size), loading_at_first_read(self._opener(f), CONFIG_MODULE),
                            functools.partial(self._settle, f), f.source_path, _vouched(f)) for f in files]

    def _unchunked(self, f: ModelFile) -> bool:
        """A file whose digest the source gave (a carton's MANIFEST, the digest cache) but whose
        table is wanted and not in the chunk cache: pending too, so the copy's one read of it
        makes the chunks (else the table would cost a read of its own before the copy)."""
        policy = self.chunks
        return (policy is not None and policy.wants(f.size) and f.digest is not None
                and f.digest not in self._chunked
                and chunkcache.lookup(f.digest, f.size, policy.chunk_size, policy.algorithm) is None)

    def _opener(self, f: ModelFile) -> Callable[[], BinaryIO]:
        """``f.open``, or for a file that gets a table a reader that also hashes its chunks."""
        policy = self.chunks
        if policy is None or not policy.wants(f.size):
            return f.open

        def open_chunking() -> BinaryIO:
            reader = ChunkingReader(f.open(), policy)
            with self._readers_lock:
                self._readers[f.path] = reader
            return reader  # type: ignore[return-value]  # a read()-stream standing in for the file it wraps

        return open_chunking

    def _settle(self, f: ModelFile, digest: str, size: int) -> None:
        _settle(f, digest, size)
        with self._readers_lock:
            reader = self._readers.pop(f.path, None)
        chunks = reader.chunks(size) if reader is not None else None
        if chunks is not None and self.chunks is not None:
            with self._readers_lock:
                self._chunked[digest] = LayerChunks(digest, size, chunks, self.chunks.algorithm)

    def artifact(self) -> ArtifactStore:
        with self._lock:
            if self._built is None:
                options = self.options
                if self.chunks is not None:
                    raw = [layer.files[0] for layer in plan_layers(self.package, options)
                           if layer.variant is Variant.RAW]
                    self.table = chunk_table(raw, self.chunks, self._chunked)
                self._built = build(self.package, options, self.table)
            return self._built

    @property
    def descriptor(self) -> Descriptor:
        return self.artifact().descriptor

    def describe(self) -> str:
        return "built artifact"

    def exists(self, desc: Descriptor) -> bool:
        return self.artifact().exists(desc)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        return self.artifact().open_blob(desc)

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        return self.artifact().fetch_bytes(desc)

    def resolve(self, reference: str) -> Descriptor:
        return self.artifact().resolve(reference)

    def tags(self) -> list[str]:
        return [ARTIFACT_TAG]

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        return []


def bind_table(options: BuildOptions, table: ChunkTable | None) -> BuildOptions:
    """``options`` whose manifest annotations name ``table`` (none for an empty one, so a model
    without large files keeps the digest it had before tables were the default)."""
    if table is None or not table.layers:
        return options
    return dataclasses.replace(options, annotations={**options.annotations, **binding_annotations(table)})


def _settle(f: ModelFile, digest: str, size: int) -> None:
    if size != f.size:
        raise SourceError(f"{f.path}: size changed while reading ({f.size} → {size})")
    if f.digest is not None and f.digest != digest:
        raise DigestMismatch(f"{f.path}: read as {digest}, the source said {f.digest}")
    f.digest = digest
    if f.source_path is not None:
        _remember(f.source_path, size, digest)


def _remember(path: Path, size: int, digest: str) -> None:
    """A file hashed whole: known by its identity next time, and by its content sample
    wherever a copy of it turns up (sampleindex.py)."""
    digestcache.remember(path, digest)
    sampleindex.remember(path, size, digest)


def build(package: ModelPackage, options: BuildOptions | None = None,
          table: ChunkTable | None = None) -> ArtifactStore:
    """Plan and describe every layer, write the config and manifest; nothing touches disk.
    ``table``: a chunk table of the raw layers, bound by the manifest and served as a blob (so a
    conversion carries it)."""
    options = bind_table(options or BuildOptions(), table)
    if not package.files and not options.allow_empty:
        raise SourceError("the model has no files")
    family = options.family
    layers = plan_layers(package, options)
    for layer in layers:
        _describe_layer(layer, family)
    descriptors = [layer.descriptor for layer in layers if layer.descriptor]
    diff_ids = [layer.diff_id for layer in layers]
    if not descriptors:  # no files: the empty descriptor, its own diffId (ModelPack wants one)
        descriptors, diff_ids = [empty_layer()], [EMPTY_DIGEST]
    descriptor = dict(package.descriptor)
    if options.created_at:
        descriptor["createdAt"] = options.created_at
    from ocibridge.model.config import parse_config  # pydantic: see CONFIG_MODULE
    config = parse_config(
        {
            "descriptor": descriptor,
            "config": dict(package.config),
            "modelfs": {"type": "layers", "diffIds": diff_ids},
        }
    )
    config_bytes = config.to_json_bytes()
    annotations = {**package.annotations, **options.annotations}
    manifest = Manifest(
        mediaType=OCI_MANIFEST,
        artifactType=family.artifact_type,
        config=Descriptor(
            mediaType=family.config_media_type,
            digest=sha256_bytes(config_bytes),
            size=len(config_bytes),
        ),
        layers=descriptors,
        annotations=annotations or None,
    )
    ArtifactPaths(manifest)  # what no pull could write is never built: pull's own judgement of the paths
    return ArtifactStore(manifest, config_bytes, layers, table if table is not None and table.layers else None)
