"""Pull of any family: what is not ModelPack is pulled through its ModelPack form, so every
family's files come out by the one extractor (tar layers unpacked, raw layers as files)."""

from __future__ import annotations

from ..oci.models import Descriptor
from ..stores.base import Store
from .base import WriteOptions
from .conversion import convert_reading
from .registry import NotAModel, identify


def as_modelpack(store: Store, reference: str) -> tuple[Store, Descriptor] | None:
    """(store, descriptor) serving the model ``reference`` names as ModelPack; None when it is
    of no known family (the caller reads it as it is: a plain OCI artifact of files)."""
    try:
        found = identify(store, reference)
    except NotAModel:
        return None
    if found.family.name == "modelpack":
        return store, found.desc
    reading = found.family.read(store, found.desc, found.data, found.manifest)
    conversion = convert_reading(found, reading, "modelpack", WriteOptions())
    return conversion.store, conversion.descriptor
