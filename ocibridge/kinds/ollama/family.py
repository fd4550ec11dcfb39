"""Ollama models as a family: read through the Ollama reader (every blob keeps its digest,
the Ollama manifest and config ride along as two small files), written by the Ollama exporter.

An Ollama manifest has no annotations: what it cannot hold (other files, descriptor fields)
is reported as lost. A model that came from Ollama goes back byte for byte (the exporter
restores the manifest from the file that carries it).
"""

from __future__ import annotations

from ocibridge.kinds.common import layer_file_path, short
from ocibridge.kinds.family import Exported, Reading, WriteOptions
from ocibridge.kinds.modelpack.family import ModelPackFamily
from ocibridge.kinds.neutral import Loss, Part
from ocibridge.oci.mediatypes import OLLAMA_LAYER_PREFIX, Kind, Variant
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.places.targets import StoreTarget
from ocibridge.stores.base import Store
from ocibridge.transfer.progress import ProgressFn


class OllamaFamily:
    name = "ollama"
    title = "Ollama model"

    def matches(self, manifest: Manifest) -> bool:
        return bool(manifest.layers) and all(
            layer.mediaType.startswith(OLLAMA_LAYER_PREFIX) for layer in manifest.layers)

    def key(self, manifest: Manifest | None, options: WriteOptions) -> str:
        return self.name

    def rewrite(self, part: Part) -> Variant | None:
        """Ollama's model is a GGUF blob of its own: weights packed in a tar are unpacked."""
        return Variant.RAW if part.variant.is_tar and part.kind is Kind.WEIGHT else None

    def read(self, store: Store, desc: Descriptor, data: bytes, manifest: Manifest) -> Reading:
        """The model as ``push ollama:NAME`` builds it: a ModelPack view over the same blobs."""
        from ocibridge.kinds.ollama import read_ollama
        from ocibridge.model.builder import build

        artifact = build(read_ollama(store, desc.digest))
        reading = ModelPackFamily().read(artifact, artifact.descriptor, artifact.manifest_bytes,
                                         artifact.manifest)
        return reading

    def export(self, store: Store, desc: Descriptor, target: StoreTarget, *, concurrency: int,
               progress: ProgressFn | None) -> Exported:
        from ocibridge.kinds.ollama import MANIFEST_FILE
        from ocibridge.kinds.ollama.exporter import export_ollama

        stats = export_ollama(store, desc, target, concurrency=concurrency, progress=progress)
        written = stats.root
        assert written is not None
        manifest = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
        assert isinstance(manifest, Manifest)
        paths = {layer_file_path(layer) for layer in manifest.layers}
        if MANIFEST_FILE in paths:
            return Exported(written, stats)  # the Ollama model it came from, restored
        kept = _names(_blobs(target.store, written))
        losses = [Loss(f"file {layer_file_path(layer)}", f"{layer.size} bytes", False)
                  for layer in manifest.layers if layer.digest not in kept]
        losses += [Loss(f"file {path}", f"its name: Ollama names it {kept[layer.digest]} (by its role)", False)
                   for layer in manifest.layers
                   if layer.digest in kept and (path := layer_file_path(layer)) != kept[layer.digest]]
        config = ModelPackFamily().read(store, desc, store.fetch_bytes(desc), manifest).view
        losses += [Loss(f"descriptor.{k}", short(v), False) for k, v in config.descriptor.items()]
        losses += [Loss(f"config.{k}", short(v), False) for k, v in config.config.items()]
        return Exported(written, stats, losses)


def _names(blobs: list[Descriptor]) -> dict[str, str]:
    """digest → the file name reading the Ollama model back gives it (its role's name)."""
    from ocibridge.kinds.ollama.mapping import default_path, numbered

    seen: dict[str, int] = {}
    names: dict[str, str] = {}
    for blob in blobs:
        if blob.mediaType.startswith(OLLAMA_LAYER_PREFIX):
            kind = blob.mediaType[len(OLLAMA_LAYER_PREFIX):]
            seen[kind] = seen.get(kind, 0) + 1
            names.setdefault(blob.digest, numbered(default_path(kind)[0], seen[kind]))
    return names


def _blobs(store: Store, desc: Descriptor) -> list[Descriptor]:
    node = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
    return [node.config, *node.layers] if isinstance(node, Manifest) else []
