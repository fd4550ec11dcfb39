"""What an artifact of no model family is, in a few words, for the line that refuses it."""

from __future__ import annotations

from ocibridge.oci.mediatypes import DOCKER_CONFIG, OCI_CONFIG, OCI_EMPTY, OLLAMA_LAYER_PREFIX
from ocibridge.oci.models import Manifest

MODELCAR_SOURCE = "io.ocibridge.modelcar.source"

_KNOWN_CONFIGS = {
    "application/vnd.cncf.helm.config.v1+json": "a Helm chart",
    "application/vnd.dev.cosign.artifact.sig.v1+json": "a cosign signature",
    "application/vnd.dev.sigstore.bundle.v0.3+json": "a sigstore bundle",
    "application/vnd.in-toto+json": "an in-toto attestation",
    "application/vnd.wasm.config.v0+json": "a WebAssembly module",
    "application/vnd.cncf.flux.config.v1+json": "a Flux artifact",
}
_KNOWN_LAYERS = {
    "application/vnd.dev.cosign.simplesigning.v1+json": "a cosign signature",
    "application/vnd.dev.sigstore.bundle.v0.3+json": "a sigstore bundle",
    "application/spdx+json": "an SPDX SBOM",
    "application/vnd.cyclonedx+json": "a CycloneDX SBOM",
}


def is_image(manifest: Manifest) -> bool:
    return manifest.config.mediaType in (OCI_CONFIG, DOCKER_CONFIG) and not manifest.artifactType


def describe_other(manifest: Manifest) -> str:
    """'a container image', 'a Helm chart', 'an OCI artifact of type X (config Y)', ..."""
    if any(layer.mediaType.startswith(OLLAMA_LAYER_PREFIX) for layer in manifest.layers):
        return "an Ollama model (read it as ollama://HOST/NAME)"
    config = manifest.config.mediaType
    if config in _KNOWN_CONFIGS:
        return _KNOWN_CONFIGS[config]
    for layer in manifest.layers:
        if layer.mediaType in _KNOWN_LAYERS:
            return _KNOWN_LAYERS[layer.mediaType]
    if is_image(manifest):
        if (manifest.annotations or {}).get(MODELCAR_SOURCE):
            return "a ModelCar image (files under /models)"
        return "a container image"
    kind = manifest.artifactType or (config if config != OCI_EMPTY else None)
    return f"an OCI artifact of type {kind}" if kind else "an OCI artifact with no type"
