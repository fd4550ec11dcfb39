"""Write a tiny OCI image layout with plain Python, independent of ocibridge (a test oracle)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_TGZ = "application/vnd.oci.image.layer.v1.tar+gzip"


@dataclass(frozen=True)
class TinyImage:
    """What was written: the manifest's digest and bytes, and every blob by digest."""

    path: Path
    tag: str
    manifest_digest: str
    manifest: bytes
    blobs: dict[str, bytes]


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def tar_of(files: dict[str, bytes]) -> bytes:
    """A reproducible uncompressed tar (sorted names, zero mtime, root-owned)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size = len(files[name])
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(files[name]))
    return buf.getvalue()


def write_tiny_image(path: Path, files: dict[str, bytes] | None = None,
                     tag: str = "latest") -> TinyImage:
    """An OCI layout at `path` holding one single-layer image tagged `tag`."""
    tar = tar_of(files or {"hello.txt": b"hello from the tiny image\n"})
    # gzip, because skopeo would compress an uncompressed layer and so rewrite the manifest
    layer = gzip.compress(tar, mtime=0)
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [_digest(tar)]},
        },
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": {"mediaType": CONFIG, "digest": _digest(config), "size": len(config)},
            "layers": [{"mediaType": LAYER_TGZ, "digest": _digest(layer), "size": len(layer)}],
        },
        separators=(",", ":"),
    ).encode()
    blobs = {_digest(b): b for b in (layer, config, manifest)}
    (path / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    for digest, data in blobs.items():
        (path / "blobs" / "sha256" / digest.split(":", 1)[1]).write_bytes(data)
    (path / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": MANIFEST,
                "digest": _digest(manifest),
                "size": len(manifest),
                "annotations": {"org.opencontainers.image.ref.name": tag},
            }
        ],
    }
    (path / "index.json").write_text(json.dumps(index))
    return TinyImage(path, tag, _digest(manifest), manifest, blobs)


def rewrite_manifest(layout: Path, tag: str, mutate: Callable[[dict[str, Any], Callable[[str], Path]], None]) -> None:
    """Rewrite the manifest ``layout`` tags ``tag`` with ``mutate(manifest, blob_path_of_digest)``
    (which may damage blobs too), then point the index at the new manifest: the layout stays
    consistent, what it holds is not."""
    index = json.loads((layout / "index.json").read_bytes())
    entry = next(m for m in index["manifests"]
                 if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag)

    def blob(digest: str) -> Path:
        return layout / "blobs" / "sha256" / digest.split(":")[1]

    manifest = json.loads(blob(entry["digest"]).read_bytes())
    mutate(manifest, blob)
    data = json.dumps(manifest).encode()
    entry["digest"], entry["size"] = _digest(data), len(data)
    blob(entry["digest"]).write_bytes(data)
    (layout / "index.json").write_text(json.dumps(index))
