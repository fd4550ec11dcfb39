"""The uncompressed digest (diffId) of a compressed tar layer, when the source does not say it."""

from __future__ import annotations

from ocibridge.layers.reader import uncompressed_digest
from ocibridge.oci.mediatypes import Variant
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import Store


def diff_id_of(store: Store, layer: Descriptor, variant: Variant) -> str:
    """sha256 of the layer's decompressed bytes (bounded as pull bounds them); reads the blob once."""
    if variant in (Variant.RAW, Variant.TAR):
        return layer.digest
    return uncompressed_digest(store, layer)
