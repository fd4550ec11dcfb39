"""The classic cosign signature artifact: tag ``sha256-<hex>.sig`` next to the signed manifest.

One OCI manifest per signed digest; each layer is one simple-signing payload and carries its
signature in the ``dev.cosignproject.cosign/signature`` annotation. More signatures of the
same digest (another key, other claims) are more layers of the same manifest. The config is the
empty image config cosign writes (zero time, one diff ID per layer); manifest and config are
serialised in go-containerregistry's field order, so the bytes match what cosign pushes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ocibridge.oci.digest import split_digest
from ocibridge.oci.mediatypes import OCI_CONFIG, OCI_MANIFEST
from ocibridge.oci.models import Descriptor
from ocibridge.signing.payload import SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE

ZERO_TIME = "0001-01-01T00:00:00Z"
#: Tags cosign keeps beside a digest: signatures, attestations, SBOMs.
COMPANION_SUFFIXES = (".sig", ".att", ".sbom")


def signature_tag(digest: str, suffix: str = ".sig") -> str:
    algorithm, hexpart = split_digest(digest)
    return f"{algorithm}-{hexpart}{suffix}"


@dataclass(frozen=True)
class SignatureLayer:
    """One signature: the payload's descriptor (with its annotations) and the payload bytes."""

    descriptor: Descriptor
    payload: bytes | None = None  # None when only the manifest was read

    @property
    def signature(self) -> str | None:
        return (self.descriptor.annotations or {}).get(SIGNATURE_ANNOTATION)


def signature_layer(payload: bytes, signature_b64: str, annotations: dict[str, str] | None = None) -> SignatureLayer:
    notes = {SIGNATURE_ANNOTATION: signature_b64, **(annotations or {})}
    desc = Descriptor.for_bytes(SIMPLE_SIGNING_MEDIA_TYPE, payload, annotations=dict(sorted(notes.items())))
    return SignatureLayer(desc, payload)


def _go_descriptor(desc: Descriptor) -> dict[str, Any]:
    out: dict[str, Any] = {"mediaType": desc.mediaType, "size": desc.size, "digest": desc.digest}
    if desc.annotations:
        out["annotations"] = dict(sorted(desc.annotations.items()))
    return out


def signature_config(layers: list[Descriptor]) -> bytes:
    doc = {
        "architecture": "",
        "created": ZERO_TIME,
        "history": [{"created": ZERO_TIME} for _ in layers],
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": [d.digest for d in layers]},
        "config": {},
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def signature_manifest(layers: list[Descriptor]) -> tuple[Descriptor, bytes, Descriptor, bytes]:
    """(config descriptor, config bytes, manifest descriptor, manifest bytes) for these layers."""
    config = signature_config(layers)
    config_desc = Descriptor.for_bytes(OCI_CONFIG, config)
    doc = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": _go_descriptor(config_desc),
        "layers": [_go_descriptor(d) for d in layers],
    }
    manifest = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    return config_desc, config, Descriptor.for_bytes(OCI_MANIFEST, manifest), manifest


def merged_layers(*groups: list[Descriptor]) -> list[Descriptor]:
    """Every layer of each group once, in order (the same payload and signature is one layer)."""
    seen: set[tuple[str, str]] = set()
    out: list[Descriptor] = []
    for group in groups:
        for desc in group:
            key = (desc.digest, json.dumps(desc.annotations or {}, sort_keys=True))
            if key not in seen:
                seen.add(key)
                out.append(desc)
    return out
