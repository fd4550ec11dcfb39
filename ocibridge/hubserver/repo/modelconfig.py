"""A model's config document as serve reads it, and the date it says the model was made."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ocibridge.core import boundedjson
from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.repo.sources import CREATED
from ocibridge.oci.models import Manifest

if TYPE_CHECKING:
    from ocibridge.stores.base import Store


#: bytes of a config read for its date (a ModelPack config is a few KiB)
CONFIG_MAX = 4 * 1024 * 1024


def config_of(store: Store, manifest: Manifest) -> dict[str, Any]:
    """The model's config document, ``{}`` when it is too large, unreadable or not JSON."""

    if manifest.config.size > CONFIG_MAX:
        return {}
    try:
        data = boundedjson.loads(store.fetch_bytes(manifest.config))
    except (OcibridgeError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def created_of(config: dict[str, Any], manifest: Manifest) -> str | None:
    """When the model was made, as the artifact says it: the config's ``descriptor.createdAt``
    (ModelPack's), else the manifest's ``org.opencontainers.image.created`` annotation; None
    when neither says (never the time of the request: a date that moves tells a client the
    model changed)."""
    descriptor = config.get("descriptor")
    created = descriptor.get("createdAt") if isinstance(descriptor, dict) else None
    if isinstance(created, str) and created:
        return created
    annotated = (manifest.annotations or {}).get(CREATED)
    return annotated if isinstance(annotated, str) and annotated else None
