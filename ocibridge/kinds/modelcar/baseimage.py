"""``k8s modelcar --base IMAGE``: the runnable image a ModelCar image is built on.

KServe's classic ModelCar mode runs the image as a sidecar (``sh``, ``ln``, ``sleep``): a
data-only image cannot start. The base (busybox, say) is read from a store, never fetched from
the internet at build time; its layers come first, unchanged (Docker layer media types are
renamed to their OCI equivalents, same bytes), then the model's. Its config is kept (command,
environment, history) with the model layers' diff_ids appended, and it names the platform.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ocibridge.errors import OcibridgeError
from ocibridge.oci.mediatypes import (
    DOCKER_CONFIG,
    DOCKER_LAYER_GZIP,
    DOCKER_LAYER_TAR,
    INDEX_TYPES,
    OCI_CONFIG,
    OCI_LAYER_TAR,
    OCI_LAYER_TAR_GZIP,
)
from ocibridge.oci.models import Descriptor, Index, Manifest, Platform, parse_manifest_bytes
from ocibridge.oci.platform import parse_platform, platform_matches
from ocibridge.stores.base import Store

_OCI_NAME = {DOCKER_LAYER_GZIP: OCI_LAYER_TAR_GZIP, DOCKER_LAYER_TAR: OCI_LAYER_TAR}
_IMAGE_LAYERS = (OCI_LAYER_TAR, OCI_LAYER_TAR_GZIP, "application/vnd.oci.image.layer.v1.tar+zstd")
HISTORY_ENTRY = "ocibridge k8s modelcar: model files under /models"


@dataclass
class BaseImage:
    """A base image read from ``store``: its layers, config (raw JSON) and platform."""

    store: Store
    layers: list[Descriptor]
    config: dict[str, Any]
    platform: Platform
    shown: str

    def config_for(self, model_layers: list[Descriptor]) -> dict[str, Any]:
        """The base's config with the model layers added: diff_ids (uncompressed: digest) and,
        where the base keeps a history, one entry per layer (runtimes check the counts agree)."""
        config: dict[str, Any] = json.loads(json.dumps(self.config))
        config["rootfs"] = {"type": "layers",
                            "diff_ids": [*self.config["rootfs"]["diff_ids"], *(d.digest for d in model_layers)]}
        if isinstance(config.get("history"), list):
            config["history"] = [*config["history"], *({"created_by": HISTORY_ENTRY} for _ in model_layers)]
        config.pop("created", None)  # reproducible: the same model and base give the same image
        return config


def open_base(store: Store, reference: str, *, platform: str, shown: str) -> BaseImage:
    """The image ``reference`` names in ``store`` for ``platform`` (through one index)."""
    want = parse_platform(platform)
    top = store.resolve(reference)
    doc = parse_manifest_bytes(store.fetch_bytes(top), top.mediaType)
    if isinstance(doc, Index) or top.mediaType in INDEX_TYPES:
        assert isinstance(doc, Index)
        chosen = next((d for d in doc.manifests if d.platform and platform_matches(d.platform, want)), None)
        if chosen is None:
            raise OcibridgeError(f"--base {shown}: the index has no image for {platform}")
        doc = parse_manifest_bytes(store.fetch_bytes(chosen), chosen.mediaType)
        if not isinstance(doc, Manifest):
            raise OcibridgeError(f"--base {shown}: nested indexes are not supported")
    manifest = doc
    if manifest.config.mediaType not in (OCI_CONFIG, DOCKER_CONFIG):
        raise OcibridgeError(f"--base {shown}: not a container image (config {manifest.config.mediaType})")
    layers = [d.model_copy(update={"mediaType": _OCI_NAME.get(d.mediaType, d.mediaType)}) for d in manifest.layers]
    odd = [d.mediaType for d in layers if d.mediaType not in _IMAGE_LAYERS]
    if odd:
        raise OcibridgeError(f"--base {shown}: layer of type {odd[0]} is not an image layer")
    try:
        config: dict[str, Any] = json.loads(store.fetch_bytes(manifest.config))
        diff_ids = config["rootfs"]["diff_ids"]
    except (ValueError, KeyError, TypeError):
        raise OcibridgeError(f"--base {shown}: its config has no rootfs.diff_ids") from None
    if not isinstance(diff_ids, list) or len(diff_ids) != len(layers):
        raise OcibridgeError(f"--base {shown}: its config lists {len(diff_ids)} diff_ids for {len(layers)} layers")
    have = Platform(os=str(config.get("os", "")), architecture=str(config.get("architecture", "")),
                    variant=config.get("variant"))
    if not platform_matches(have, want):
        raise OcibridgeError(f"--base {shown} is {have.os}/{have.architecture}, not {platform}")
    return BaseImage(store, layers, config, have, shown)
