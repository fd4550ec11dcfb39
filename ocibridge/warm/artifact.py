"""A compile cache as an OCI artifact: one layer (the cache), an empty config, the key in the
manifest's annotations, and the model's manifest as its ``subject``, so that the registry lists
it among the model's referrers and a copy with referrers carries it."""

from __future__ import annotations

from dataclasses import dataclass

from ocibridge.oci.empty import empty_descriptor
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.base import ReadableStore, referrers_read
from ocibridge.warm.cachekey import WarmKey

ARTIFACT_TYPE = "application/vnd.ocibridge.warm.v1+json"
#: the layer's media type by the key's ``form``
LAYER_TYPES = {"dir": "application/vnd.ocibridge.warm.dir.v1.tar", "torch": "application/vnd.ocibridge.warm.torch.v1"}


@dataclass(frozen=True)
class CacheArtifact:
    """One cache attached to a model: its manifest's descriptor, its key and its one layer."""

    desc: Descriptor
    key: WarmKey
    layer: Descriptor


def cache_manifest(subject: Descriptor, key: WarmKey, layer: Descriptor) -> tuple[Descriptor, bytes]:
    """The manifest (descriptor, bytes) keeping ``layer`` beside ``subject``: made from the
    digests and the key alone, so the same cache gives the same manifest digest."""
    bare = Descriptor(mediaType=subject.mediaType, digest=subject.digest, size=subject.size)
    manifest = Manifest(mediaType=OCI_MANIFEST, artifactType=ARTIFACT_TYPE, config=empty_descriptor(),
                        layers=[layer], subject=bare, annotations=key.annotations())
    body = manifest.to_json_bytes()
    return Descriptor.for_bytes(OCI_MANIFEST, body, artifactType=ARTIFACT_TYPE, annotations=key.annotations()), body


def attached_caches(store: ReadableStore, subject: Descriptor) -> list[CacheArtifact]:
    """The caches among ``subject``'s referrers, read from their manifests (digest-checked; a
    listing's annotations are not what is trusted), sorted by digest. A referrer of our type
    without a whole key or one layer of a known type is left out: no process could match it."""
    found = []
    held = referrers_read(store, subject)
    for ref in held:
        if ref.artifactType not in (None, ARTIFACT_TYPE):
            continue
        node = parse_manifest_bytes(held.manifest(ref), ref.mediaType)
        if not isinstance(node, Manifest) or node.artifactType != ARTIFACT_TYPE or len(node.layers) != 1:
            continue
        key = WarmKey.from_annotations(node.annotations)
        if key is None or node.layers[0].mediaType != LAYER_TYPES.get(key.form):
            continue
        found.append(CacheArtifact(Descriptor(mediaType=ref.mediaType, digest=ref.digest, size=ref.size,
                                              artifactType=ARTIFACT_TYPE), key, node.layers[0]))
    return sorted(found, key=lambda c: c.desc.digest)
