"""Pull of any family: what is not ModelPack is pulled through its ModelPack form, so every
family's files come out by the one extractor (tar layers unpacked, raw layers as files)."""

from __future__ import annotations

from ..oci.models import Descriptor
from ..stores.base import Store
from .base import WriteOptions
from .conversion import convert_reading
from .registry import Identified, NotAModel, identify


def as_modelpack(store: Store, reference: str) -> tuple[Store, Descriptor] | None:
    """(store, descriptor) serving the model ``reference`` names as ModelPack; None when it is
    of no known family but a plain OCI artifact of files (the caller reads it as it is). A
    container image, or an index of no model, is refused saying what it is."""
    try:
        found = identify(store, reference)
    except NotAModel as not_a_model:
        if not_a_model.files_artifact:
            return None
        raise
    return modelpack_of(found, store)


def modelpack_of(found: Identified, store: Store) -> tuple[Store, Descriptor]:
    """The ModelPack form of a model already identified in ``store`` (read once, not again)."""
    if found.family.name == "modelpack":
        return store, found.desc
    reading = found.family.read(store, found.desc, found.data, found.manifest)
    conversion = convert_reading(found, reading, "modelpack", WriteOptions())
    return conversion.store, conversion.descriptor
