"""The uncompressed digest (diffId) of a compressed tar layer, when the source does not say it."""

from __future__ import annotations

import hashlib

from ..oci.digest import CHUNK
from ..oci.mediatypes import Variant
from ..oci.models import Descriptor
from ..stores.base import Store


def diff_id_of(store: Store, layer: Descriptor, variant: Variant) -> str:
    """sha256 of the layer's decompressed bytes (bounded as pull bounds them); reads the blob once."""
    from ..modelpack.extract import _decompressed

    if variant in (Variant.RAW, Variant.TAR):
        return layer.digest
    h = hashlib.sha256()
    with store.open_blob(layer) as reader:
        stream = _decompressed(reader, variant, layer.size)
        while chunk := stream.read(CHUNK):
            h.update(chunk)
        while reader.read(CHUNK):  # to EOF, where the store verifies the blob
            pass
    return "sha256:" + h.hexdigest()
