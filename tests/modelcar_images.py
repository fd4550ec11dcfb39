"""ModelCar images as other tools build them, generated faithfully (no image is checked in).

Provenance. KServe's modelcar documentation builds the image with a Dockerfile such as::

    FROM busybox
    RUN mkdir /models && chmod 775 /models
    COPY model /models

``docker build`` (BuildKit) then writes: the base image's layer as it is (busybox: ``bin/busybox``
with every applet a hard link to it, ``etc/passwd``, ``tmp/`` 1777, ...), one layer per ``RUN``
and ``COPY`` (entries relative to ``/`` without a leading slash, parent directories included,
uid/gid 0, the files' modes kept, PAX headers), each gzip-compressed; an image config whose
``rootfs.diff_ids`` are the sha256 of each uncompressed layer, ``config.Env``/``Cmd`` inherited
from busybox and a ``history`` entry per instruction; a Docker v2 manifest (``docker push``), or
an OCI manifest (``buildx --output type=oci``, ``podman build``). A later ``RUN rm /models/x``
layer holds the whiteout ``models/.wh.x``. This module writes exactly those shapes into an OCI
layout; the busybox layer is a small stand-in with the same entry types (no real binary).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

from ocibridge.oci.models import Descriptor
from ocibridge.stores.layout import LayoutStore

DOCKER = {
    "manifest": "application/vnd.docker.distribution.manifest.v2+json",
    "config": "application/vnd.docker.container.image.v1+json",
    "layer": "application/vnd.docker.image.rootfs.diff.tar.gzip",
}
OCI = {
    "manifest": "application/vnd.oci.image.manifest.v1+json",
    "config": "application/vnd.oci.image.config.v1+json",
    "layer": "application/vnd.oci.image.layer.v1.tar+gzip",
}
MTIME = 1_700_000_000
#: (path, type, mode, content or link target): the busybox-like base layer
BASE: list[tuple[str, str, int, bytes | str]] = [
    ("bin", "dir", 0o755, b""),
    ("bin/busybox", "file", 0o755, b"\x7fELF busybox stand-in\n" * 64),
    ("bin/sh", "hard", 0o755, "bin/busybox"),
    ("bin/ln", "hard", 0o755, "bin/busybox"),
    ("bin/sleep", "hard", 0o755, "bin/busybox"),
    ("etc", "dir", 0o755, b""),
    ("etc/passwd", "file", 0o644, b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/home:/bin/false\n"),
    ("etc/localtime", "sym", 0o777, "../usr/share/zoneinfo/UTC"),
    ("tmp", "dir", 0o1777, b""),
    ("usr", "dir", 0o755, b""),
    ("usr/share", "dir", 0o755, b""),
    ("usr/share/zoneinfo", "dir", 0o755, b""),
    ("usr/share/zoneinfo/UTC", "file", 0o644, b"TZif2 UTC\n"),
]


def _tar(entries: list[tuple[str, str, int, bytes | str]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, kind, mode, body in entries:
            info = tarfile.TarInfo(path)
            info.mode, info.mtime, info.uid, info.gid = mode, MTIME, 0, 0
            data = None
            if kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, str(body)
            elif kind == "hard":
                info.type, info.linkname = tarfile.LNKTYPE, str(body)
            elif kind == "whiteout":
                info.size = 0
                data = io.BytesIO(b"")
            else:
                assert isinstance(body, bytes)
                info.size, data = len(body), io.BytesIO(body)
            tar.addfile(info, data)
    return out.getvalue()


def copy_layer(files: dict[str, tuple[bytes, int]], dest: str = "models") -> list[tuple[str, str, int, bytes | str]]:
    """``COPY model /models``: the destination and every parent directory, then the files."""
    entries: list[tuple[str, str, int, bytes | str]] = [(dest, "dir", 0o775, b"")]
    dirs: set[str] = set()
    for rel in sorted(files):
        parts = rel.split("/")[:-1]
        for i in range(len(parts)):
            d = "/".join(parts[: i + 1])
            if d not in dirs:
                dirs.add(d)
                entries.append((f"{dest}/{d}", "dir", 0o755, b""))
        body, mode = files[rel]
        entries.append((f"{dest}/{rel}", "file", mode, body))
    return entries


def write_image(layout: Path, tag: str, layers: list[list[tuple[str, str, int, bytes | str]] | bytes], *,
                docker: bool, created_by: list[str] | None = None,
                annotations: dict[str, str] | None = None) -> str:
    """An image of ``layers`` (each a list of tar entries, or the tar's bytes as they are; each
    gzip-compressed), tagged in ``layout``; returns its reference ``oci:LAYOUT:TAG``."""
    kinds = DOCKER if docker else OCI
    store = LayoutStore(layout, create=True)
    descriptors, diff_ids = [], []
    for entries in layers:
        raw = entries if isinstance(entries, bytes) else _tar(entries)
        blob = gzip.compress(raw, mtime=0)
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        desc = Descriptor.for_bytes(kinds["layer"], blob)
        store.push_blob(desc, io.BytesIO(blob))
        descriptors.append({"mediaType": desc.mediaType, "digest": desc.digest, "size": desc.size})
    history = [{"created": "2026-01-01T00:00:00Z", "created_by": c} for c in
               (created_by or ["/bin/sh -c #(nop) ADD file:busybox in / "]
                + ["COPY model /models # buildkit"] * (len(layers) - 1))]
    config = json.dumps({
        "architecture": "amd64",
        "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": ["sh"]},
        "created": "2026-01-01T00:00:00Z",
        "history": history,
        "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }, separators=(",", ":")).encode()
    config_desc = Descriptor.for_bytes(kinds["config"], config)
    store.push_blob(config_desc, io.BytesIO(config))
    manifest_doc: dict = {"schemaVersion": 2, "mediaType": kinds["manifest"],
                          "config": {"mediaType": config_desc.mediaType, "digest": config_desc.digest,
                                     "size": config_desc.size},
                          "layers": descriptors}
    if annotations:
        manifest_doc["annotations"] = annotations
    manifest = json.dumps(manifest_doc, indent=3).encode()
    store.push_manifest(Descriptor.for_bytes(kinds["manifest"], manifest), manifest, tag)
    return f"oci:{layout}:{tag}"


def kserve_modelcar(layout: Path, files: dict[str, tuple[bytes, int]], *, docker: bool = True,
                    tag: str = "v1") -> str:
    """``FROM busybox`` + ``COPY model /models`` of the model ``files`` (path → (bytes, mode))."""
    return write_image(layout, tag, [BASE, copy_layer(files)], docker=docker)
