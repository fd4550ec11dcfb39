"""Round trips: the source's manifest and config ride along in annotations of the converted one.

Converting A to B writes ``io.ocibridge.origin.<A>.manifest`` and ``.config`` (A's exact bytes)
into B's manifest. Converting B back to A finds them and, when B still points at the same
blobs, gives back A's bytes, hence A's manifest digest. Origins of other families travel along,
so A → B → C → A comes back too. Past :data:`MAX_ORIGIN_BYTES` nothing is kept (the converter
then reports what the target lost).
"""

from __future__ import annotations

import json

from ..oci.digest import sha256_bytes
from ..oci.models import Manifest, parse_manifest_bytes
from .model import ModelView, Written

PREFIX = "io.ocibridge.origin."
MAX_ORIGIN_BYTES = 256 * 1024


def manifest_key(family: str) -> str:
    return f"{PREFIX}{family}.manifest"


def config_key(family: str) -> str:
    return f"{PREFIX}{family}.config"


def is_origin_key(key: str) -> bool:
    return key.startswith(PREFIX)


def carried(view: ModelView, target: str) -> tuple[dict[str, str], bool]:
    """Origin annotations for a conversion of ``view`` into family ``target``, and whether the
    view's own bytes fit (False: the way back cannot be exact)."""
    out = {k: v for k, v in view.annotations.items()
           if is_origin_key(k) and not k.startswith(f"{PREFIX}{target}.")}
    if view.family == target:
        return out, True
    try:
        manifest, config = view.manifest.decode(), view.config_bytes.decode()
    except UnicodeDecodeError:
        return out, False
    if len(manifest) + len(config) + sum(len(v) for v in out.values()) > MAX_ORIGIN_BYTES:
        return out, False
    out[manifest_key(view.family)] = manifest
    out[config_key(view.family)] = config
    return out, True


def strip(annotations: dict[str, str]) -> dict[str, str]:
    """Annotations without the origin records (what a family's own tools care about)."""
    return {k: v for k, v in annotations.items() if not is_origin_key(k)}


def restore(view: ModelView, target: str, media_type: str, config_media_type: str) -> Written | None:
    """``target``'s original manifest and config, when ``view`` carries them and still points at
    exactly the blobs they name; else None."""
    manifest_text = view.annotations.get(manifest_key(target))
    config_text = view.annotations.get(config_key(target))
    if manifest_text is None or config_text is None:
        return None
    data, config = manifest_text.encode(), config_text.encode()
    try:
        manifest = parse_manifest_bytes(data, media_type)
    except Exception:  # a damaged record is no reason to fail: convert as if it were absent
        return None
    if not isinstance(manifest, Manifest) or manifest.config.digest != sha256_bytes(config):
        return None
    if manifest.config.size != len(config):
        return None
    ours = sorted((p.blob.digest, p.blob.size) for p in view.parts)
    theirs = sorted((layer.digest, layer.size) for layer in manifest.layers)
    if ours != theirs:
        return None
    with_type = json.loads(data).get("mediaType") or media_type
    return Written(
        manifest=data,
        media_type=with_type,
        config=config,
        config_media_type=manifest.config.mediaType or config_media_type,
        artifact_type=manifest.artifactType,
    )
