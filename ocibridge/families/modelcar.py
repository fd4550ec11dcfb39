"""ModelCar images (files under ``/models``, what containerd and KServe mount) as a family.

Written by ``k8s modelcar`` beside the ModelPack form in the destination repository: the image
names that artifact in its ``io.ocibridge.modelcar.source`` annotation, so reading a ModelCar
back is reading that artifact (the original digest, every field). Images whose source is not in
the repository (built by other tools) are refused with a line saying so.
"""

from __future__ import annotations

from typing import Any

from ..copy import copy
from ..errors import NotFound, SourceError
from ..oci.mediatypes import OCI_MANIFEST
from ..oci.models import Descriptor, Manifest, parse_manifest_bytes
from ..progress import ProgressFn
from ..stores.base import Store
from ..targets import open_store_target
from .base import Exported, Reading, WriteOptions
from .describe import MODELCAR_SOURCE, is_image
from .modelpack import ModelPackFamily


class ModelCarFamily:
    name = "modelcar"
    title = "ModelCar image"

    def matches(self, manifest: Manifest) -> bool:
        return is_image(manifest) and bool((manifest.annotations or {}).get(MODELCAR_SOURCE))

    def key(self, manifest: Manifest | None, options: WriteOptions) -> str:
        return self.name

    def read(self, store: Store, desc: Descriptor, data: bytes, manifest: Manifest) -> Reading:
        source = (manifest.annotations or {})[MODELCAR_SOURCE]
        try:
            found = store.resolve(source)
        except NotFound:
            raise SourceError(
                f"ModelCar image {desc.digest}: its ModelPack artifact {source} is not in "
                f"{store.describe()} (ModelCar images are read back through the artifact they were built from)"
            ) from None
        found = Descriptor(mediaType=found.mediaType or OCI_MANIFEST, digest=found.digest, size=found.size)
        body = store.fetch_bytes(found)
        node = parse_manifest_bytes(body, found.mediaType)
        if not isinstance(node, Manifest) or not ModelPackFamily().matches(node):
            raise SourceError(f"ModelCar image {desc.digest}: {source} is not a ModelPack artifact")
        return ModelPackFamily().read(store, found, body, node)

    def export(self, store: Store, desc: Descriptor, dst: str, *, registry_options: dict[str, Any],
               concurrency: int, progress: ProgressFn | None) -> Exported:
        """Copy the ModelPack form (untagged), then build the image from it in place."""
        from ..k8s import build_modelcar

        target = open_store_target(dst, for_write=True, **registry_options)
        stats = copy(store, desc.digest, target.store, None, concurrency=concurrency, progress=progress)
        image = build_modelcar(target.store, desc.digest, tag=target.tag)
        stats.root = image
        return Exported(image, stats)
