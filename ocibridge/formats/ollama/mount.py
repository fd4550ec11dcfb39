"""Cross-repository mounts for an Ollama model pushed as a ModelPack artifact.

The built artifact serves the Ollama blobs under their own digests, but a copy from it cannot
mount them (its source is the builder, not the registry). When the Ollama model and the
destination live on the same registry, mounting the blobs first makes the copy skip them.
"""

from __future__ import annotations

from ...oci.models import Descriptor
from ...stores.base import Store
from .manifest import manifest_blobs, parse_ollama_manifest


def premount(origin: Store, reference: str, dst: Store) -> int:
    """Mount into ``dst`` every blob of the Ollama model ``reference`` in ``origin`` that ``dst``
    lacks and can mount; returns how many were mounted (0 when ``dst`` cannot mount)."""
    mount = getattr(dst, "mount_from", None)
    if mount is None:
        return 0
    desc = origin.resolve(reference)
    manifest = parse_ollama_manifest(origin.fetch_bytes(desc), where=f"Ollama manifest {desc.digest}")
    mounted = 0
    for blob in manifest_blobs(manifest):
        d = Descriptor(mediaType=blob.mediaType.split(";")[0], digest=blob.digest, size=blob.size)
        if not dst.exists(d) and mount(d, origin):
            mounted += 1
    return mounted
