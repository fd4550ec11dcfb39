"""The one layer of a record serve keeps in the registry (the refs record, the reads record): its
manifest checked to be that record's, both read within the record's size."""

from __future__ import annotations

from ocibridge.errors import OcibridgeError
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.stores.base import Store


def record_layer(store: Store, desc: Descriptor, artifact_type: str, layer_type: str, most: int, what: str,
                 error: type[Exception]) -> bytes:
    """The bytes of the ``layer_type`` layer of the ``artifact_type`` manifest ``desc``; ``error``
    when it is no such record, or either is over ``most`` bytes (the store's own failures raise)."""
    if desc.size > most:
        raise error(f"{desc.size} bytes")
    body = store.fetch_bytes(desc)
    try:
        manifest = parse_manifest_bytes(body, desc.mediaType)
    except OcibridgeError as e:
        raise error(str(e)) from None
    if not isinstance(manifest, Manifest) or manifest.artifactType != artifact_type:
        raise error(f"not a {what} record")
    layer = next((d for d in manifest.layers if d.mediaType == layer_type), None)
    if layer is None or layer.size > most:
        raise error(f"no {what} layer of a size read")
    return store.fetch_bytes(layer)
