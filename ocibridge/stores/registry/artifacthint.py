"""Why a registry may have refused a manifest: an OCI 1.1 artifact's, said in the same one line."""

from __future__ import annotations

from ocibridge.errors import OcibridgeError, RegistryError
from ocibridge.oci.models import Manifest, parse_manifest_bytes

#: Config media types every registry takes (an image's); others are OCI 1.1-era artifacts.
IMAGE_CONFIGS = frozenset({"application/vnd.oci.image.config.v1+json",
                           "application/vnd.docker.container.image.v1+json"})


def artifact_hint(error: RegistryError, data: bytes, media_type: str) -> RegistryError:
    """A refused manifest that is an artifact's: say so, in the same one line. Registries
    before OCI 1.1 refuse ``artifactType``, some (GitLab) config types that are not an
    image's (docs/registry.md); the digest names these bytes, so nothing can be dropped."""
    try:
        manifest = parse_manifest_bytes(data, media_type)
    except OcibridgeError:
        return error
    config = manifest.config.mediaType if isinstance(manifest, Manifest) else None
    parts = []
    if manifest.artifactType:
        parts.append(f"artifactType {manifest.artifactType}")
    if config and config not in IMAGE_CONFIGS:
        parts.append(f"config media type {config}")
    if not parts:
        return error
    return RegistryError(f"{error}; the registry may not take OCI 1.1 artifact manifests "
                         f"(this one has {' and '.join(parts)}; see `ocibridge check-registry`)",
                         error.status, error.code, error.credentials_sent)
