"""Cross-repository mounts for an Ollama model pushed as a ModelPack artifact.

The built artifact serves the Ollama blobs under their own digests, but a copy from it cannot
mount them (its source is the builder, not the registry). When the Ollama model and the
destination live on the same registry, the copy is told where each of those blobs lives
(:class:`ocibridge.transfer.copy.CopyHooks` ``mounts``) and mounts it instead of uploading it.
"""

from __future__ import annotations

from ocibridge.kinds.ollama.manifest import manifest_blobs, parse_ollama_manifest
from ocibridge.stores.base import Store


def mount_sources(origin: Store, reference: str) -> dict[str, Store]:
    """Every blob of the Ollama model ``reference`` in ``origin``, by digest -> ``origin``: the
    ``mounts`` of a copy of its ModelPack form."""
    desc = origin.resolve(reference)
    manifest = parse_ollama_manifest(origin.fetch_bytes(desc), where=f"Ollama manifest {desc.digest}")
    return {blob.digest: origin for blob in manifest_blobs(manifest)}
