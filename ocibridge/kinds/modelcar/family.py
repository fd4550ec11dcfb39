"""ModelCar images (files under ``/models``, what containerd and KServe mount) as a family.

Written by ``k8s modelcar`` beside the ModelPack form in the destination repository: the image
names that artifact in its ``io.ocibridge.modelcar.source`` annotation, so reading a ModelCar
back is reading that artifact (the original digest, every field). Images built by other tools
(KServe's ``FROM busybox`` + ``COPY model /models``), or ours copied without their source, are
recognised by their layers and read as the files under /models (:mod:`.modelcar_image`); what
the image says beyond those files (base layers, Env, Cmd, labels) is reported as lost.
"""

from __future__ import annotations

from typing import Any

from ocibridge.errors import NotFound, SourceError
from ocibridge.kinds.describe import MODELCAR_SOURCE, is_image
from ocibridge.kinds.family import Exported, Reading, WriteOptions
from ocibridge.kinds.modelcar.image import ModelsTree, has_models, image_config, read_models
from ocibridge.kinds.modelpack.family import ModelPackFamily
from ocibridge.kinds.undo import undone_on_failure
from ocibridge.model.package import ModelPackage
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.places.targets import StoreTarget
from ocibridge.stores.base import Store
from ocibridge.transfer.copy import copy
from ocibridge.transfer.progress import ProgressFn


class ModelCarFamily:
    name = "modelcar"
    title = "ModelCar image"

    def matches(self, manifest: Manifest) -> bool:
        return is_image(manifest) and bool((manifest.annotations or {}).get(MODELCAR_SOURCE))

    def key(self, manifest: Manifest | None, options: WriteOptions) -> str:
        return self.name

    def probe(self, store: Store, desc: Descriptor, manifest: Manifest) -> bool:
        return has_models(store, manifest)

    def read(self, store: Store, desc: Descriptor, data: bytes, manifest: Manifest) -> Reading:
        source = (manifest.annotations or {}).get(MODELCAR_SOURCE)
        if not source:
            return _read_files(store, manifest)
        try:
            found = store.resolve(source)
        except NotFound:  # copied without the artifact it was built from: read its files
            return _read_files(store, manifest)
        found = Descriptor(mediaType=found.mediaType or OCI_MANIFEST, digest=found.digest, size=found.size)
        body = store.fetch_bytes(found)
        node = parse_manifest_bytes(body, found.mediaType)
        if not isinstance(node, Manifest) or not ModelPackFamily().matches(node):
            raise SourceError(f"ModelCar image {desc.digest}: {source} is not a ModelPack artifact")
        return ModelPackFamily().read(store, found, body, node)

    def export(self, store: Store, desc: Descriptor, target: StoreTarget, *, concurrency: int,
               progress: ProgressFn | None) -> Exported:
        """Copy the ModelPack form (untagged), then build the image from it in place."""
        from ocibridge.kinds.modelcar.build import build_modelcar

        with undone_on_failure(target.store):  # a failure in either step leaves a layout as it was
            stats = copy(store, desc.digest, target.store, None, concurrency=concurrency, progress=progress)
            image = build_modelcar(target.store, desc.digest, tag=target.tag, stats=stats, undo_on_failure=False)
        stats.root = image
        return Exported(image, stats, keeps_source=True)


def _read_files(store: Store, manifest: Manifest) -> Reading:
    """The files under /models as a ModelPack artifact built in memory (metadata read from the
    files as a directory push reads it), served from a staging directory that lives as long as
    the artifact's store."""
    from ocibridge.model import metadata
    from ocibridge.model.builder import build

    config = image_config(store, manifest)
    models = read_models(store, manifest, config)
    try:
        package = _package(models, config)
        metadata.fill(package)
        artifact = build(package)
    except BaseException:
        models.remove()
        raise
    models.remove_with(artifact)
    reading = ModelPackFamily().read(artifact, artifact.descriptor, artifact.manifest_bytes, artifact.manifest)
    reading.losses = models.losses
    return reading


def _package(models: ModelsTree, config: dict[str, Any]) -> ModelPackage:
    """The staged files as a package: kinds by name (as a directory push), links kept as links,
    the name from the image's title label when it has one."""
    from ocibridge.model import metadata
    from ocibridge.model.classify import classify
    from ocibridge.model.package import ModelFile

    files = []
    for rel, kind, target in models.entries:
        if kind == "symlink":
            files.append(ModelFile(rel, classify(rel, 0), 0, link_target=target))
        else:
            path = models.root / rel
            files.append(ModelFile.from_path(rel, path, classify(rel, path.stat().st_size)))
    labels = (config.get("config") or {}).get("Labels") if isinstance(config.get("config"), dict) else None
    title = labels.get("org.opencontainers.image.title") if isinstance(labels, dict) else None
    if isinstance(title, str) and len(title) > metadata.MAX_NAME:  # another tool's label: no name this long
        metadata.note(f"image label org.opencontainers.image.title of {len(title)} characters is no name; ignored")
        title = None
    descriptor = {"name": title} if isinstance(title, str) and title else {}
    return ModelPackage(files=files, descriptor=descriptor, source_format="modelcar")
