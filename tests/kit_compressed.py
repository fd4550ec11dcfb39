"""ModelKits as ``kit pack --compression gzip|zstd`` writes them, made from the stored kit fixture.

Provenance: kit's packing code (kitops-ml/kitops, ``pkg/lib/filesystem`` and
``pkg/lib/constants/mediatype``) compresses each layer's tar as a whole, names the layer
``…v1.tar+gzip`` / ``…v1.tar+zstd``, and records in the Kitfile config each element's ``digest``
(of the compressed blob) and ``diffId`` (of the tar, unchanged). This helper applies exactly that
to the uncompressed fixture in ``tests/data/kitops/kit-latest-tar`` (see its PROVENANCE.md).
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import zstandard
from support.data import data

from ocibridge.oci.models import Descriptor
from ocibridge.stores.layout import LayoutStore

KIT_DIGEST = "sha256:9e968bb72078b3787d2362f20657d1d69d6aeda467bfacf0ed04d65423e480ea"


def _compress(raw: bytes, compression: str) -> bytes:
    return gzip.compress(raw, mtime=0) if compression == "gzip" else zstandard.ZstdCompressor().compress(raw)


def _redigest(node, renamed: dict[str, str]) -> None:
    """Every element's ``digest`` in the Kitfile config, renamed to the compressed blob's."""
    if isinstance(node, dict):
        if isinstance(node.get("digest"), str) and node["digest"] in renamed:
            node["digest"] = renamed[node["digest"]]
        for value in node.values():
            _redigest(value, renamed)
    elif isinstance(node, list):
        for value in node:
            _redigest(value, renamed)


def compressed_kit(layout: Path, compression: str, tag: str = "v1") -> str:
    """The fixture kit repacked with ``--compression COMPRESSION`` into ``layout``; its reference."""
    src = LayoutStore(data("kitops", "kit-latest-tar"))
    dst = LayoutStore(layout, create=True)
    manifest = json.loads(src.fetch_bytes(src.resolve(KIT_DIGEST)))
    renamed: dict[str, str] = {}
    for layer in manifest["layers"]:
        raw = src.fetch_bytes(Descriptor.model_validate(layer))
        blob = _compress(raw, compression)
        desc = Descriptor.for_bytes(layer["mediaType"] + "+" + compression, blob)
        dst.push_blob(desc, io.BytesIO(blob))
        renamed[layer["digest"]] = desc.digest
        layer.update(mediaType=desc.mediaType, digest=desc.digest, size=desc.size)
    config = json.loads(src.fetch_bytes(Descriptor.model_validate(manifest["config"])))
    _redigest(config, renamed)
    body = json.dumps(config, separators=(",", ":")).encode()
    config_desc = Descriptor.for_bytes(manifest["config"]["mediaType"], body)
    dst.push_blob(config_desc, io.BytesIO(body))
    manifest["config"].update(digest=config_desc.digest, size=config_desc.size)
    data_ = json.dumps(manifest, indent=3).encode()
    dst.push_manifest(Descriptor.for_bytes(manifest["mediaType"], data_), data_, tag)
    return f"oci:{layout}:{tag}"
