"""Artifacts of the early CNAI model draft (model-spec docs/spec.md, late 2024), built with plain
Python and independent of ocibridge (a test oracle): OCI image-layer media types, each layer
carrying an ``artifactType`` (``application/vnd.cnai.model.{layer,doc,config}.v1.tar[+gzip]``)
and ``org.cnai.model.*`` annotations, the manifest ``artifactType``
``application/vnd.cnai.model.manifest.v1+json``, the config the OCI empty descriptor."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"
ARTIFACT_TYPE = "application/vnd.cnai.model.manifest.v1+json"
TAR = "application/vnd.oci.image.layer.v1.tar"
TAR_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
#: the draft's manifest annotations, as a model of it would carry them
ANNOTATIONS = {
    "org.cnai.model.created": "2024-11-05T10:00:00Z",
    "org.cnai.model.authors": "Draft Authors <draft@example.com>",
    "org.cnai.model.url": "https://example.com/draft-model",
    "org.cnai.model.documentation": "https://example.com/draft-model/docs",
    "org.cnai.model.source": "https://github.com/example/draft-model",
    "org.cnai.model.version": "1.0",
    "org.cnai.model.revision": "abc123",
    "org.cnai.model.vendor": "Example Org",
    "org.cnai.model.licenses": "Apache-2.0",
    "org.cnai.model.ref.name": "draft-model:1.0",
    "org.cnai.model.title": "Draft Model",
    "org.cnai.model.description": "A model written to the early CNAI draft",
    "org.cnai.model.architecture": "transformer",
    "org.cnai.model.family": "llama3",
    "org.cnai.model.name": "draft-llama",
    "org.cnai.model.format": "safetensors",
    "org.cnai.model.param.size": "8b",
    "org.cnai.model.precision": "bf16",
    "org.cnai.model.quantization": "awq",
}


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class DraftLayer:
    """One layer: ``files`` (name -> bytes; a name ``d/.wh.x`` is a whiteout), ``links`` (name ->
    target), its draft ``kind`` (layer, doc, config), gzip or not, its filepath annotation."""

    files: dict[str, bytes]
    kind: str = "layer"
    gzip: bool = False
    filepath: str | None = None
    links: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    hardlinks: dict[str, str] = field(default_factory=dict)

    def tar(self) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name in sorted(self.files):
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(self.files[name]), 0o644
                tar.addfile(info, io.BytesIO(self.files[name]))
            for name, target in sorted(self.links.items()):
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, target
                tar.addfile(info)
            for name, target in sorted(self.hardlinks.items()):
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.LNKTYPE, target
                tar.addfile(info)
        return buf.getvalue()

    def blob(self) -> bytes:
        return gzip.compress(self.tar(), mtime=0) if self.gzip else self.tar()

    def descriptor(self) -> dict[str, object]:
        data = self.blob()
        suffix = "+gzip" if self.gzip else ""
        annotations = dict(self.annotations)
        if self.filepath is not None:
            annotations["org.cnai.model.filepath"] = self.filepath
        desc: dict[str, object] = {
            "mediaType": TAR_GZIP if self.gzip else TAR, "digest": digest(data), "size": len(data),
            "artifactType": f"application/vnd.cnai.model.{self.kind}.v1.tar{suffix}",
        }
        if annotations:
            desc["annotations"] = annotations
        return desc


@dataclass(frozen=True)
class DraftArtifact:
    path: Path
    tag: str
    manifest_digest: str
    manifest: bytes


def write_draft(path: Path, layers: list[DraftLayer], *, tag: str = "draft",
                annotations: dict[str, str] | None = None) -> DraftArtifact:
    """An OCI layout at ``path`` holding one draft artifact tagged ``tag``."""
    config = b"{}"
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "artifactType": ARTIFACT_TYPE,
        "config": {"mediaType": EMPTY, "digest": digest(config), "size": len(config), "data": "e30="},
        "layers": [layer.descriptor() for layer in layers],
        "annotations": dict(ANNOTATIONS if annotations is None else annotations),
    }, separators=(",", ":")).encode()
    blobs = [config, manifest, *(layer.blob() for layer in layers)]
    (path / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    for data in blobs:
        (path / "blobs" / "sha256" / digest(data).split(":", 1)[1]).write_bytes(data)
    (path / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
        {"mediaType": MANIFEST, "digest": digest(manifest), "size": len(manifest), "artifactType": ARTIFACT_TYPE,
         "annotations": {"org.opencontainers.image.ref.name": tag}}]}
    (path / "index.json").write_text(json.dumps(index))
    return DraftArtifact(path, tag, digest(manifest), manifest)


def sample_layers() -> list[DraftLayer]:
    """A model of the draft: weights (tar, with a filepath), a gzip weight layer without one, docs
    and config marked as the draft marks them, and a later layer whose whiteout deletes a file."""
    return [
        DraftLayer({"model.safetensors": b"W" * 3000}, filepath="model.safetensors"),
        DraftLayer({"shards/part-1.bin": b"p1" * 500, "shards/stale.bin": b"old"}, gzip=True),
        DraftLayer({"README.md": b"# Draft model\n"}, kind="doc", filepath="README.md",
                   annotations={"org.cnai.model.readme": "true"}),
        DraftLayer({"LICENSE": b"Apache-2.0\n"}, kind="doc", gzip=True, filepath="LICENSE",
                   annotations={"org.cnai.model.license": "true"}),
        DraftLayer({"config.json": b'{"model_type": "llama"}', "tokenizer.json": b"{}"}, kind="config"),
        DraftLayer({"shards/.wh.stale.bin": b""}, kind="layer"),
    ]


#: the files a pull of :func:`sample_layers` gives, exactly
SAMPLE_FILES = {
    "model.safetensors": b"W" * 3000,
    "shards/part-1.bin": b"p1" * 500,
    "README.md": b"# Draft model\n",
    "LICENSE": b"Apache-2.0\n",
    "config.json": b'{"model_type": "llama"}',
    "tokenizer.json": b"{}",
}
