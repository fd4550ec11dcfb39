"""Round trips: the source's manifest and config ride along in annotations of the converted one.

Converting A to B writes ``io.ocibridge.origin.<A>.manifest`` and ``.config`` (A's exact bytes)
into B's manifest. Converting B back to A finds them and, when B still points at the same
blobs, gives back A's bytes, hence A's manifest digest. Origins of other families travel along,
so A → B → C → A comes back too. Each record names the config digest of the artifact it was
written into (``.of``): once that artifact's metadata is edited (``--arch`` on a conversion, or
another tool rewriting the config), the records are dropped. Past :data:`MAX_ORIGIN_BYTES`
nothing is kept, and the converter reports what the target lost.
"""

from __future__ import annotations

from ocibridge.core import boundedjson
from ocibridge.kinds.neutral import ModelView, Written
from ocibridge.oci.digest import sha256_bytes
from ocibridge.oci.empty import is_empty_layer
from ocibridge.oci.models import Manifest, parse_manifest_bytes

PREFIX = "io.ocibridge.origin."
MAX_ORIGIN_BYTES = 256 * 1024


def manifest_key(family: str) -> str:
    return f"{PREFIX}{family}.manifest"


def config_key(family: str) -> str:
    return f"{PREFIX}{family}.config"


def of_key(family: str) -> str:
    """The digest of the config the record was written with: a record whose artifact's
    config has changed since (edited metadata) no longer describes it and is ignored."""
    return f"{PREFIX}{family}.of"


def is_origin_key(key: str) -> bool:
    return key.startswith(PREFIX)


def valid_origins(view: ModelView) -> dict[str, tuple[str, str]]:
    """family → (manifest, config) of the records that still describe ``view``."""
    ours = sha256_bytes(view.config_bytes)
    found: dict[str, tuple[str, str]] = {}
    for key, value in view.annotations.items():
        if key.startswith(PREFIX) and key.endswith(".manifest"):
            family = key[len(PREFIX):-len(".manifest")]
            config = view.annotations.get(config_key(family))
            if config is not None and view.annotations.get(of_key(family)) == ours:
                found[family] = (value, config)
    return found


def can_keep(view: ModelView, target: str) -> bool:
    """Whether the view's own bytes can ride along (so what the target lacks is not lost)."""
    if view.edited:
        return False
    if view.family == target:
        return True
    try:
        size = len(view.manifest.decode()) + len(view.config_bytes.decode())
    except UnicodeDecodeError:
        return False
    return size + sum(len(m) + len(c) for m, c in valid_origins(view).values()) <= MAX_ORIGIN_BYTES


def carried(view: ModelView, target: str, config: bytes) -> dict[str, str]:
    """Origin annotations for ``view`` converted into family ``target`` whose config is
    ``config``: the view's own bytes and the records it carries, none when it was edited."""
    if view.edited:
        return {}
    records = {f: mc for f, mc in valid_origins(view).items() if f != target}
    if view.family != target and can_keep(view, target):
        records[view.family] = (view.manifest.decode(), view.config_bytes.decode())
    stamp = sha256_bytes(config)
    out: dict[str, str] = {}
    for family, (manifest, cfg) in sorted(records.items()):
        out[manifest_key(family)] = manifest
        out[config_key(family)] = cfg
        out[of_key(family)] = stamp
    return out


def strip(annotations: dict[str, str]) -> dict[str, str]:
    """Annotations without the origin records (what a family's own tools care about)."""
    return {k: v for k, v in annotations.items() if not is_origin_key(k)}


def restore(view: ModelView, target: str, media_type: str) -> Written | None:
    """``target``'s original manifest and config, when ``view`` carries a record of them that
    still describes it and names exactly the blobs it points at; else None."""
    if view.edited:
        return None
    record = valid_origins(view).get(target)
    if record is None:
        return None
    data, config = record[0].encode(), record[1].encode()
    try:
        manifest = parse_manifest_bytes(data, media_type)
    except Exception:  # a damaged record is no reason to fail: convert as if it were absent
        return None
    if not isinstance(manifest, Manifest) or manifest.config.digest != sha256_bytes(config):
        return None
    if manifest.config.size != len(config):
        return None
    ours = sorted((p.blob.digest, p.blob.size) for p in view.parts)
    # (the empty descriptor, the one layer of a model of no files, is no part: the view answers it)
    theirs = sorted((layer.digest, layer.size) for layer in manifest.layers if not is_empty_layer(layer))
    if ours != theirs:
        return None
    with_type = boundedjson.loads(data).get("mediaType") or media_type
    return Written(
        manifest=data,
        media_type=with_type,
        config=config,
        config_media_type=manifest.config.mediaType,
        artifact_type=manifest.artifactType,
    )
