"""``k8s modelcar``: a ModelPack artifact becomes an OCI image with its files under ``/models``.

containerd mounts only images, and KServe's ModelCar convention reads ``/models``. The image
has one uncompressed tar layer per artifact layer (so a weight file that did not change keeps
its layer digest across versions), ``models/`` directory entries in every layer, fixed
metadata (packing.py's conventions), and an image config whose diff_ids are the layer digests.
The model's bytes are streamed from the store: once to hash, once to push (a remote source is
spooled to a temporary file per layer instead of being downloaded twice).

With ``index=True`` an image index holds one image manifest per platform (same layers, a
config naming that platform) and the ModelPack manifest without a platform, so one reference
serves CRI-O, containerd and ModelPack tools; see docs/kubernetes.md for the trade-off.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, BinaryIO

from ocibridge.core.confined import check_link, check_links, no_link_on_the_way
from ocibridge.core.fsutil import is_root_entry, safe_relpath, write_sliced
from ocibridge.core.streams import IterReader, Reader, open_tar_stream
from ocibridge.errors import NotFound, OcibridgeError, UnsafePath
from ocibridge.kinds.modelcar.baseimage import BaseImage
from ocibridge.layers.reader import layer_mode, layer_path, open_layer
from ocibridge.layers.tarwalk import tar_members
from ocibridge.model.extract import read_model_manifest
from ocibridge.model.package import ModelFile, normalise_mode
from ocibridge.model.packing import BLOCK, RECORD, TAR_FORMAT, tar_member
from ocibridge.oci.digest import CHUNK, VerifyingReader, sha256_chunks, verify_bytes
from ocibridge.oci.empty import is_empty_layer
from ocibridge.oci.mediatypes import (
    OCI_CONFIG,
    OCI_INDEX,
    OCI_LAYER_TAR,
    OCI_MANIFEST,
    Family,
    Kind,
    Variant,
    family_of_artifact,
    parse_layer_media_type,
)
from ocibridge.oci.models import Descriptor, ImageConfig, Index, Manifest, ManifestRead, RootFS
from ocibridge.oci.platform import parse_platform
from ocibridge.stores.base import PendingBlob, Store, WritableStore
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import CopyHooks, CopyStats, copy

ROOT = "models"
DEFAULT_PLATFORMS = ("linux/amd64", "linux/arm64")
#: overlayfs and Docker cap layer counts near 125; more artifact layers are merged in order.
MAX_IMAGE_LAYERS = 100
SOURCE_ANNOTATION = "io.ocibridge.modelcar.source"


@dataclass
class _Layer:
    sources: list[Descriptor]
    descriptor: Descriptor | None = None


def build_modelcar(
    store: WritableStore,
    reference: str,
    *,
    tag: str | None = None,
    index: bool = False,
    platforms: tuple[str, ...] = DEFAULT_PLATFORMS,
    stats: CopyStats | None = None,
    undo_on_failure: bool = True,
    base: BaseImage | None = None,
    read: ManifestRead | None = None,
) -> Descriptor:
    """Write the image (or the index) into ``store`` and return its descriptor; ``stats``
    counts what was uploaded and what was there already (``convert --to modelcar`` reports it).
    ``undo_on_failure``: a layout takes back what a failed build added (off for a caller whose
    own undo block holds several writes). ``base``: a runnable image (:mod:`.baseimage`) whose
    layers and config come first, for KServe's sidecar mode; its platform is the only one.
    ``read``: the model's manifest as the caller read it (not read again).

    The image is a read-only store (:class:`ModelCarImage`) moved by the one copy, as a push
    moves a planned artifact: existence checks, mounts, progress and undo are the copy's."""
    if not platforms:
        raise OcibridgeError("at least one platform is needed")
    read = _source(store, reference, read)
    image = ModelCarImage(store, read.desc, read.manifest, index=index, platforms=platforms,
                          spool=not isinstance(store, LayoutStore), base=base, src_data=read.data)
    try:
        done = copy(image, IMAGE_TAG, store, tag, hooks=CopyHooks(undo_on_failure=undo_on_failure))
    finally:
        image.close()
    if stats is not None:
        stats.add(blobs_copied=done.blobs_copied, blobs_skipped=done.blobs_skipped,
                  blobs_mounted=done.blobs_mounted, bytes_copied=done.bytes_copied,
                  manifests_copied=done.manifests_copied)
    assert done.root is not None
    return done.root


#: The one reference a :class:`ModelCarImage` resolves.
IMAGE_TAG = "modelcar"


class ModelCarImage:
    """The ModelCar image of one ModelPack artifact, as a read-only store.

    Its tar layers are made from the artifact's layers when read. Their digests are unknown
    until then: from a local source they are :class:`PendingBlobs` (a copy into a store that
    ingests sends each while hashing it, the source read once); from a remote source each is
    spooled to a temporary file on first resolve and hashed, so the destination is asked for
    it before anything is sent and the source is downloaded once. The
    configs, manifests and index are made in memory once the layers are known; the ModelPack
    manifest an index names is the source's, served from the source store.
    """

    def __init__(self, source: Store, src_desc: Descriptor, src: Manifest, *, index: bool,
                 platforms: tuple[str, ...], spool: bool, base: BaseImage | None = None,
                 src_data: bytes | None = None):
        self.source, self.src_desc, self.src = source, src_desc, src
        self._src_data = src_data  # the model manifest's bytes as read: an index names it, served from here
        self.index, self.spool, self.base = index, spool, base
        self.platforms = [parse_platform(text) for text in (platforms if index else platforms[:1])]
        if base is not None:
            self.platforms = [base.platform]
        self._base_layers = {d.digest: d for d in base.layers} if base is not None else {}
        self.groups = _partition(src.layers)
        self._spooled: dict[str, IO[bytes]] = {}  # layer digest -> its spooled bytes
        self._small: dict[str, bytes] = {}  # configs, manifests, the index
        self._top: Descriptor | None = None
        self._lock = threading.Lock()

    def pending_blobs(self) -> list[PendingBlob]:
        if self.spool:  # a remote source: each layer is spooled once, then asked for and sent
            return []
        return [PendingBlob(_stand_in(i), functools.partial(self._stream, group), functools.partial(_settle, group))
                for i, group in enumerate(self.groups) if group.descriptor is None]

    def _stream(self, group: _Layer) -> BinaryIO:
        return IterReader(_tar(self.source, group.sources))  # type: ignore[return-value]  # only read

    def close(self) -> None:
        for spooled in self._spooled.values():
            spooled.close()
        self._spooled.clear()

    def _layers(self) -> dict[str, _Layer]:
        return {g.descriptor.digest: g for g in self.groups if g.descriptor is not None}

    def _finish(self) -> Descriptor:
        with self._lock:
            if self._top is None:
                for group in self.groups:
                    if group.descriptor is None:
                        self._hash(group)
                self._top = self._describe()
            return self._top

    def _hash(self, group: _Layer) -> None:
        if not self.spool:
            digest, size = sha256_chunks(_tar(self.source, group.sources))
        else:
            spooled = tempfile.TemporaryFile(prefix=".ocibridge-modelcar-")  # noqa: SIM115 - kept until close()
            digest, size = sha256_chunks(_tee(_tar(self.source, group.sources), spooled))
            self._spooled[digest] = spooled
        group.descriptor = Descriptor(mediaType=OCI_LAYER_TAR, digest=digest, size=size)

    def _keep(self, media_type: str, data: bytes) -> Descriptor:
        desc = Descriptor.for_bytes(media_type, data)
        self._small[desc.digest] = data
        return desc

    def _describe(self) -> Descriptor:
        layers = [g.descriptor for g in self.groups if g.descriptor is not None]
        manifests: list[Descriptor] = []
        for plat in self.platforms:
            if self.base is not None:
                data = json.dumps(self.base.config_for(layers), sort_keys=True, separators=(",", ":")).encode()
                config_desc = self._keep(OCI_CONFIG, data)
            else:
                config = ImageConfig(architecture=plat.architecture, os=plat.os, config={},
                                     rootfs=RootFS(diff_ids=[d.digest for d in layers]))
                if plat.variant:
                    config.model_extra["variant"] = plat.variant  # no field of its own: kept as an extra one
                config_desc = self._keep(OCI_CONFIG, config.to_json_bytes())
            all_layers = [*(self.base.layers if self.base is not None else []), *layers]
            manifest = Manifest(mediaType=OCI_MANIFEST, config=config_desc, layers=all_layers,
                                annotations={SOURCE_ANNOTATION: self.src_desc.digest})
            desc = self._keep(OCI_MANIFEST, manifest.to_json_bytes())
            manifests.append(desc.model_copy(update={"platform": plat}))
        if not self.index:
            return manifests[0].model_copy(update={"platform": None})
        entry = Descriptor(mediaType=self.src_desc.mediaType, digest=self.src_desc.digest,
                           size=self.src_desc.size,
                           artifactType=self.src.artifactType or _family(self.src).artifact_type)
        return self._keep(OCI_INDEX, Index(mediaType=OCI_INDEX, manifests=[*manifests, entry]).to_json_bytes())

    # -- the readable store ------------------------------------------------------------------
    def describe(self) -> str:
        return f"ModelCar image of {self.src_desc.digest}"

    def exists(self, desc: Descriptor) -> bool:
        self._finish()
        if self.base is not None and desc.digest in self._base_layers:
            return True
        return desc.digest in self._small or desc.digest in self._layers() or self.source.exists(desc)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        self._finish()
        if desc.digest in self._small:
            return io.BytesIO(verify_bytes(self._small[desc.digest], desc.digest, desc.size))
        group = self._layers().get(desc.digest)
        if group is None and self.base is not None and desc.digest in self._base_layers:
            return self.base.store.open_blob(desc)
        if group is None:
            return self.source.open_blob(desc)
        spooled = self._spooled.get(desc.digest)
        if spooled is not None:
            spooled.seek(0)
            raw: Reader = _Unclosed(spooled)
        else:
            raw = IterReader(_tar(self.source, group.sources))
        return VerifyingReader(raw, desc.digest, desc.size)  # type: ignore[return-value]  # as the stores' readers

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        self._finish()
        if desc.digest in self._small:
            return verify_bytes(self._small[desc.digest], desc.digest, desc.size)
        if desc.digest in self._layers():
            raise OcibridgeError(f"{desc.digest} is a layer of the ModelCar image, not a manifest or config")
        if desc.digest == self.src_desc.digest and self._src_data is not None:
            return verify_bytes(self._src_data, desc.digest, desc.size)
        return self.source.fetch_bytes(desc)

    def resolve(self, reference: str) -> Descriptor:
        top = self._finish()
        if reference in (IMAGE_TAG, top.digest):
            return top
        raise NotFound(f"{self.describe()}: no reference {reference}")

    def tags(self) -> list[str]:
        return [IMAGE_TAG]

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        return []


def _stand_in(number: int) -> Descriptor:
    """What progress calls the image's ``number``-th layer until its digest is known."""
    return Descriptor(mediaType=OCI_LAYER_TAR, size=0,
                      digest="sha256:" + hashlib.sha256(f"modelcar layer {number}".encode()).hexdigest())


def _settle(group: _Layer, digest: str, size: int) -> None:
    group.descriptor = Descriptor(mediaType=OCI_LAYER_TAR, digest=digest, size=size)


class _Unclosed:
    """A spooled layer's file, read by a copy that closes what it reads: kept open for reuse."""

    def __init__(self, raw: IO[bytes]):
        self._raw = raw

    def read(self, n: int = -1) -> bytes:
        return self._raw.read(n)

    def close(self) -> None:
        pass


def _family(manifest: Manifest) -> Family:
    family = family_of_artifact(manifest.artifactType, manifest.config.mediaType)
    if family is None:
        raise OcibridgeError("not a ModelPack artifact (no cnai/cncf artifactType or config)")
    return family


def _source(store: Store, reference: str, read: ManifestRead | None) -> ManifestRead:
    """The ModelPack manifest ``reference`` names, directly or as an entry of an index (the
    one index -> model rule, as pull has it): ``read`` where the caller read it, else read here."""
    read = read if read is not None else read_model_manifest(store, reference)
    _family(read.manifest)
    return read


def _partition(layers: list[Descriptor]) -> list[_Layer]:
    if not layers:
        raise OcibridgeError("the artifact has no layers")
    if all(is_empty_layer(layer) for layer in layers):  # (what validate refuses of a ModelCar: nothing to serve)
        raise OcibridgeError("the model has no files (its last one was deleted): a ModelCar image of it "
                             "would hold an empty /models directory")
    count = min(len(layers), MAX_IMAGE_LAYERS)
    size, extra = divmod(len(layers), count)
    out, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        out.append(_Layer(layers[start:end]))
        start = end
    return out


def _tee(chunks: Iterator[bytes], out: IO[bytes]) -> Iterator[bytes]:
    for chunk in chunks:
        write_sliced(out, chunk)
        yield chunk


# -- the tar stream -------------------------------------------------------------------------------
class _Writer:
    """Emits tar headers with packing.py's fixed metadata; ``models/`` parents come first."""

    def __init__(self) -> None:
        self.dirs: set[str] = set()
        self.written = 0

    def _out(self, data: bytes) -> bytes:
        self.written += len(data)
        return data

    def header(self, info: tarfile.TarInfo) -> bytes:
        return self._out(info.tobuf(TAR_FORMAT, "utf-8", "surrogateescape"))

    def parents(self, path: str) -> Iterator[bytes]:
        parts = path.split("/")[:-1]
        for i in range(len(parts)):
            yield from self.directory("/".join(parts[: i + 1]))

    def directory(self, path: str) -> Iterator[bytes]:
        if path in self.dirs:
            return
        yield from self.parents(path)
        self.dirs.add(path)
        info = tarfile.TarInfo(path)
        info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        yield self.header(info)

    def body(self, src: Reader, size: int, what: str) -> Iterator[bytes]:
        remaining = size
        while remaining > 0:
            data = src.read(min(CHUNK, remaining))
            if not data:
                raise OcibridgeError(f"{what}: content ended early")
            remaining -= len(data)
            yield self._out(data)
        if size % BLOCK:
            yield self._out(b"\0" * (BLOCK - size % BLOCK))

    def end(self) -> bytes:
        tail = b"\0" * (2 * BLOCK)
        return self._out(tail + b"\0" * (-(self.written + len(tail)) % RECORD))


def _tar(store: Store, sources: list[Descriptor]) -> Iterator[bytes]:
    w = _Writer()
    yield from w.directory(ROOT)
    for desc in sources:
        kind = parse_layer_media_type(desc.mediaType)
        if kind is not None and kind.variant.is_tar:
            yield from _retar(store, desc, kind.variant, w)
        else:
            yield from _raw(store, desc, w)
    yield w.end()


def _raw(store: Store, desc: Descriptor, w: _Writer) -> Iterator[bytes]:
    name = layer_path(desc)
    if name is None:
        raise OcibridgeError(f"layer {desc.digest} has no file path annotation")
    path = f"{ROOT}/{safe_relpath(name, 'layer file path')}"
    yield from w.parents(path)
    yield w.header(tar_member(ModelFile(path, Kind.WEIGHT, desc.size, mode=layer_mode(desc))))
    with store.open_blob(desc) as src:
        yield from w.body(src, desc.size, path)
        if src.read(1):
            raise OcibridgeError(f"{path}: blob longer than its descriptor")


def _retar(store: Store, desc: Descriptor, variant: Variant, w: _Writer) -> Iterator[bytes]:
    """Re-root a tar layer of the artifact under ``models/`` (entries keep their order)."""
    with open_layer(store, desc) as stream:
        links: dict[str, str] = {}  # the layer's symlinks, resolved together (confined.py)
        with open_tar_stream(stream) as tar:
            for member in tar_members(tar):
                if is_root_entry(member.name):
                    continue
                rel = safe_relpath(member.name.rstrip("/"), "tar entry")
                path = f"{ROOT}/{rel}"
                no_link_on_the_way(rel, links.__contains__, what="tar entry")
                if member.isdir():
                    yield from w.directory(path)
                    continue
                yield from w.parents(path)
                if member.issym():
                    check_link(rel, member.linkname, links.get)
                    links[rel] = member.linkname
                    yield w.header(tar_member(ModelFile(path, Kind.CODE, 0, link_target=member.linkname)))
                elif member.isfile():
                    info = tar_member(ModelFile(path, Kind.CODE, member.size, mode=member.mode))
                    yield w.header(info)
                    src = tar.extractfile(member)
                    assert src is not None
                    yield from w.body(src, member.size, path)
                elif member.islnk():
                    target = safe_relpath(member.linkname, "hard link target")
                    info = tarfile.TarInfo(path)
                    info.type, info.linkname, info.mtime = tarfile.LNKTYPE, f"{ROOT}/{target}", 0
                    info.mode, info.uid, info.gid, info.uname, info.gname = (
                        normalise_mode(member.mode), 0, 0, "", ""
                    )
                    yield w.header(info)
                else:
                    raise UnsafePath(f"{rel}: unsupported tar entry type in the artifact")
        check_links(links)  # a later link can turn an earlier, harmless one into an escape
        while stream.read(CHUNK):  # to its end: the blob is verified there
            pass
