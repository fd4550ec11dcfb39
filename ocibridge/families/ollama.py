"""Ollama models as a family: read through the Ollama reader (every blob keeps its digest,
the Ollama manifest and config ride along as two small files), written by the Ollama exporter.

An Ollama manifest has no annotations: what it cannot hold (other files, descriptor fields)
is reported as lost. A model that came from Ollama goes back byte for byte (the exporter
restores the manifest from the file that carries it).
"""

from __future__ import annotations

from typing import Any

from ..copy import CopyStats
from ..modelpack.builder import build
from ..oci.mediatypes import OLLAMA_LAYER_PREFIX
from ..oci.models import Descriptor, Manifest, parse_manifest_bytes
from ..progress import ProgressFn
from ..stores.base import Store
from ..targets import open_store_target
from .base import Exported, Reading, WriteOptions
from .common import layer_file_path
from .model import Loss
from .modelpack import ModelPackFamily, short


class OllamaFamily:
    name = "ollama"
    title = "Ollama model"

    def matches(self, manifest: Manifest) -> bool:
        return bool(manifest.layers) and all(
            layer.mediaType.startswith(OLLAMA_LAYER_PREFIX) for layer in manifest.layers)

    def key(self, manifest: Manifest | None, options: WriteOptions) -> str:
        return self.name

    def read(self, store: Store, desc: Descriptor, data: bytes, manifest: Manifest) -> Reading:
        """The model as ``push ollama:NAME`` builds it: a ModelPack view over the same blobs."""
        from ..formats.ollama import read_ollama

        artifact = build(read_ollama(store, desc.digest))
        reading = ModelPackFamily().read(artifact, artifact.descriptor, artifact.manifest_bytes,
                                         artifact.manifest)
        return reading

    def export(self, store: Store, desc: Descriptor, dst: str, *, registry_options: dict[str, Any],
               concurrency: int, progress: ProgressFn | None) -> Exported:
        from ..formats.ollama import MANIFEST_FILE, export_ollama

        target = open_store_target(dst, for_write=True, **registry_options)
        written = export_ollama(store, desc, target, concurrency=concurrency, progress=progress)
        stats = CopyStats(root=written, manifests_copied=1)
        manifest = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
        assert isinstance(manifest, Manifest)
        paths = {layer_file_path(layer) for layer in manifest.layers}
        if MANIFEST_FILE in paths:
            return Exported(written, stats)  # the Ollama model it came from, restored
        kept = {blob.digest for blob in _blobs(target.store, written)}
        losses = [Loss(f"file {layer_file_path(layer)}", f"{layer.size} bytes", False)
                  for layer in manifest.layers if layer.digest not in kept]
        config = ModelPackFamily().read(store, desc, store.fetch_bytes(desc), manifest).view
        losses += [Loss(f"descriptor.{k}", short(v), False) for k, v in config.descriptor.items()]
        losses += [Loss(f"config.{k}", short(v), False) for k, v in config.config.items()]
        return Exported(written, stats, losses)


def _blobs(store: Store, desc: Descriptor) -> list[Descriptor]:
    node = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
    return [node.config, *node.layers] if isinstance(node, Manifest) else []
