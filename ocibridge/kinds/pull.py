"""Pull of any family: what is not ModelPack is pulled through its ModelPack form, so every
family's files come out by the one extractor (tar layers unpacked, raw layers as files)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ocibridge.kinds.families import Identified
    from ocibridge.oci.models import Descriptor
    from ocibridge.stores.base import Store


def modelpack_of(found: Identified, store: Store) -> tuple[Store, Descriptor]:
    """The ModelPack form of a model already identified in ``store`` (read once, not again)."""
    if found.family.name == "modelpack":
        return store, found.desc
    from ocibridge.kinds.conversion import convert_reading
    from ocibridge.kinds.family import WriteOptions  # another family: converted (its modules loaded now, not before)

    reading = found.family.read(store, found.desc, found.data, found.manifest)
    conversion = convert_reading(found, reading, "modelpack", WriteOptions())
    return conversion.store, conversion.descriptor
