"""``k8s modelcar`` of a model of any family, not only ModelPack.

``k8s check --runtime containerd`` tells the user of a ModelKit or a Docker model to build a
ModelCar image; the image is built from the model's ModelPack form, stored beside it untagged,
exactly as ``convert --to modelcar`` exports it (the same image). Kept apart from the family
modules: it uses the table of kinds, whose families are loaded as detection reaches them.
"""

from __future__ import annotations

from ocibridge.kinds.families import identify
from ocibridge.kinds.modelcar.baseimage import BaseImage
from ocibridge.kinds.modelcar.build import DEFAULT_PLATFORMS, build_modelcar
from ocibridge.kinds.pull import modelpack_of
from ocibridge.kinds.undo import undone_on_failure
from ocibridge.oci.models import Descriptor, ManifestRead
from ocibridge.stores.base import WritableStore
from ocibridge.transfer.copy import DEFAULT_CONCURRENCY, copy


def build_from_any(store: WritableStore, reference: str, *, shown: str, tag: str | None, index: bool,
                   platforms: tuple[str, ...] | None = None, base: BaseImage | None = None) -> Descriptor:
    """``k8s modelcar`` of a model of any family: one that is not ModelPack (a ModelKit, a
    Docker model, a ModelCar image) has its ModelPack form stored beside it, untagged, and the
    image is built from that, as ``convert --to modelcar`` does; a container image or another
    artifact is refused saying what it is (``shown``: the reference as the user wrote it)."""
    found = identify(store, reference, shown=shown)
    read: ManifestRead | None
    with undone_on_failure(store):  # a failure in either step leaves a layout as it was
        if found.family.name != "modelpack":
            form, desc = modelpack_of(found, store)
            copy(form, desc.digest, store, None, concurrency=DEFAULT_CONCURRENCY, progress=None)
            reference = desc.digest
            read = None
        else:  # the manifest identify read is the one built from: not read again
            read = ManifestRead(found.desc, found.data, found.manifest)
        return build_modelcar(store, reference, tag=tag, index=index, platforms=platforms or DEFAULT_PLATFORMS,
                              undo_on_failure=False, base=base, read=read)  # the block above holds both steps
