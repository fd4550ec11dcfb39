"""Hand-made images for the image-volume tests: tar layers with exact modes, owners, links and
whiteouts, and manifests whose config media type (or its absence), manifest media type and
artifactType are chosen by the test. Written into any Store: a layout or the test registry."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass

from ocibridge.oci.mediatypes import OCI_CONFIG, OCI_LAYER_TAR, OCI_MANIFEST
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import Store

DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"


@dataclass(frozen=True)
class Entry:
    """One tar entry: kind is file, dir, sym (data = target), link (data = hard-link target),
    fifo, chr or blk (data = "major:minor")."""

    name: str
    kind: str = "file"
    data: bytes | str = b""
    mode: int = 0o644
    uid: int = 0
    gid: int = 0


def tar_layer(entries: list[Entry]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            info = tarfile.TarInfo(e.name)
            info.mode, info.uid, info.gid, info.mtime = e.mode, e.uid, e.gid, 0
            if e.kind == "dir":
                info.type = tarfile.DIRTYPE
                t.addfile(info)
            elif e.kind in ("fifo", "chr", "blk"):
                info.type = {"fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE, "blk": tarfile.BLKTYPE}[e.kind]
                if e.kind != "fifo":
                    info.devmajor, info.devminor = (int(n) for n in str(e.data).split(":"))
                t.addfile(info)
            elif e.kind in ("sym", "link"):
                info.type = tarfile.SYMTYPE if e.kind == "sym" else tarfile.LNKTYPE
                info.linkname = str(e.data)
                t.addfile(info)
            else:
                assert isinstance(e.data, bytes)
                info.size = len(e.data)
                t.addfile(info, io.BytesIO(e.data))
    return buf.getvalue()


def _push_bytes(store: Store, media_type: str, data: bytes) -> Descriptor:
    desc = Descriptor.for_bytes(media_type, data)
    if not store.exists(desc):
        store.push_blob(desc, io.BytesIO(data))
    return desc


def push_image(
    store: Store,
    tag: str,
    layers: list[list[Entry]],
    *,
    config_media_type: str | None = OCI_CONFIG,
    manifest_media_type: str = OCI_MANIFEST,
    artifact_type: str | None = None,
    layer_media_type: str = OCI_LAYER_TAR,
) -> str:
    """Push an uncompressed image; ``config_media_type=None`` leaves the config descriptor's
    mediaType out. Returns the manifest digest."""
    blobs = [tar_layer(entries) for entries in layers]
    descs = [_push_bytes(store, layer_media_type, b).model_dump(exclude_none=True) for b in blobs]
    config = json.dumps({
        "architecture": "amd64", "os": "linux", "config": {},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(b).hexdigest() for b in blobs]},
    }).encode()
    cdesc = _push_bytes(store, config_media_type or OCI_CONFIG, config).model_dump(exclude_none=True)
    if config_media_type is None:
        del cdesc["mediaType"]
    doc: dict = {"schemaVersion": 2, "mediaType": manifest_media_type, "config": cdesc, "layers": descs}
    if artifact_type:
        doc["artifactType"] = artifact_type
    data = json.dumps(doc).encode()
    desc = Descriptor.for_bytes(manifest_media_type, data)
    store.push_manifest(desc, data, tag)
    return desc.digest
