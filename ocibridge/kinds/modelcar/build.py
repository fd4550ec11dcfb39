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

import io
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from ocibridge.core.confined import check_link, check_links, no_link_on_the_way
from ocibridge.core.fsutil import is_root_entry, safe_relpath, write_sliced
from ocibridge.core.streams import IterReader, Reader, open_tar_stream
from ocibridge.errors import OcibridgeError, UnsafePath
from ocibridge.layers.reader import layer_mode, layer_path, open_layer
from ocibridge.layers.tarwalk import tar_members
from ocibridge.model.extract import fetch_manifest
from ocibridge.model.package import ModelFile, normalise_mode
from ocibridge.model.packing import BLOCK, RECORD, TAR_FORMAT, tar_member
from ocibridge.oci.digest import CHUNK, sha256_chunks
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
from ocibridge.oci.models import Descriptor, ImageConfig, Index, Manifest, RootFS
from ocibridge.oci.platform import parse_platform
from ocibridge.stores.base import Store, WritableStore
from ocibridge.stores.layout import LayoutStore
from ocibridge.transfer.copy import CopyStats

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
) -> Descriptor:
    """Write the image (or the index) into ``store`` and return its descriptor; ``stats``
    counts what was uploaded and what was there already (``convert --to modelcar`` reports it)."""
    if not platforms:
        raise OcibridgeError("at least one platform is needed")
    stats = stats if stats is not None else CopyStats()
    src_desc, src = _source(store, reference)
    groups = _partition(src.layers)
    spool = not isinstance(store, LayoutStore)
    for layer in groups:
        _build_layer(store, layer, spool, stats)
    layers = [g.descriptor for g in groups if g.descriptor]
    chosen = platforms if index else platforms[:1]
    manifests: list[Descriptor] = []
    for text in chosen:
        plat = parse_platform(text)
        config = ImageConfig(
            architecture=plat.architecture,
            os=plat.os,
            config={},
            rootfs=RootFS(diff_ids=[d.digest for d in layers]),
        )
        if plat.variant:
            config.model_extra["variant"] = plat.variant  # no field of its own: kept as an extra one
        config_bytes = config.to_json_bytes()
        config_desc = Descriptor.for_bytes(OCI_CONFIG, config_bytes)
        if _counted(store, config_desc, stats):
            store.push_blob(config_desc, io.BytesIO(config_bytes))
        manifest = Manifest(
            mediaType=OCI_MANIFEST,
            config=config_desc,
            layers=layers,
            annotations={SOURCE_ANNOTATION: src_desc.digest},
        )
        data = manifest.to_json_bytes()
        desc = Descriptor.for_bytes(OCI_MANIFEST, data)
        stats.add(manifests_copied=0 if store.exists(desc) else 1)
        store.push_manifest(desc, data, None if index else tag)
        manifests.append(desc.model_copy(update={"platform": plat}))
    if not index:
        return manifests[0].model_copy(update={"platform": None})
    entry = Descriptor(
        mediaType=src_desc.mediaType,
        digest=src_desc.digest,
        size=src_desc.size,
        artifactType=src.artifactType or _family(src).artifact_type,
    )
    top = Index(mediaType=OCI_INDEX, manifests=[*manifests, entry])
    data = top.to_json_bytes()
    desc = Descriptor.for_bytes(OCI_INDEX, data)
    stats.add(manifests_copied=0 if store.exists(desc) else 1)
    store.push_manifest(desc, data, tag)
    return desc


def _family(manifest: Manifest) -> Family:
    family = family_of_artifact(manifest.artifactType, manifest.config.mediaType)
    if family is None:
        raise OcibridgeError("not a ModelPack artifact (no cnai/cncf artifactType or config)")
    return family


def _source(store: Store, reference: str) -> tuple[Descriptor, Manifest]:
    """The ModelPack manifest ``reference`` names, directly or as an entry of an index (the
    one index -> model rule, as pull has it)."""
    desc, doc = fetch_manifest(store, reference)
    _family(doc)
    return desc, doc


def _partition(layers: list[Descriptor]) -> list[_Layer]:
    if not layers:
        raise OcibridgeError("the artifact has no layers")
    count = min(len(layers), MAX_IMAGE_LAYERS)
    size, extra = divmod(len(layers), count)
    out, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        out.append(_Layer(layers[start:end]))
        start = end
    return out


def _counted(store: WritableStore, desc: Descriptor, stats: CopyStats) -> bool:
    """Whether ``desc`` must be uploaded (counted as copied), else counted as already there."""
    if store.exists(desc):
        stats.add(blobs_skipped=1)
        return False
    stats.add(blobs_copied=1, bytes_copied=desc.size)
    return True


def _build_layer(store: WritableStore, layer: _Layer, spool: bool, stats: CopyStats) -> None:
    """Hash the layer, then push it: from a second pass, or from a spooled copy."""
    if not spool:
        digest, size = sha256_chunks(_tar(store, layer.sources))
        layer.descriptor = Descriptor(mediaType=OCI_LAYER_TAR, digest=digest, size=size)
        if _counted(store, layer.descriptor, stats):
            store.push_blob(layer.descriptor, IterReader(_tar(store, layer.sources)))  # type: ignore[arg-type]  # push_blob only reads
        return
    with tempfile.TemporaryFile(prefix=".ocibridge-modelcar-") as tmp:
        digest, size = sha256_chunks(_tee(_tar(store, layer.sources), tmp))
        layer.descriptor = Descriptor(mediaType=OCI_LAYER_TAR, digest=digest, size=size)
        if _counted(store, layer.descriptor, stats):
            tmp.seek(0)
            store.push_blob(layer.descriptor, tmp)


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
