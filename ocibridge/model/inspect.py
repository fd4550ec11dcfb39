"""A readable summary of an artifact: manifest, config and a layer table."""

from __future__ import annotations

import json
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.core.terminal import human_size as human_size  # its home since the copy's summary needs it alone
from ocibridge.core.terminal import one_line
from ocibridge.layers.reader import layer_path
from ocibridge.model.extract import read_model_manifest
from ocibridge.oci.empty import is_empty_model
from ocibridge.oci.layerinfo import layer_type
from ocibridge.oci.models import ManifestRead
from ocibridge.stores.base import Store


def inspect(store: Store, reference: str) -> dict[str, Any]:
    return summary(store, read_model_manifest(store, reference))


def summary(store: Store, read: ManifestRead) -> dict[str, Any]:
    """:func:`inspect` of the model manifest in hand (read, checked and parsed)."""
    desc, manifest = read.desc, read.manifest
    try:
        config: Any = boundedjson.loads(store.fetch_bytes(manifest.config))
    except ValueError:
        config = None
    layers = []
    for layer in manifest.layers:
        kind = layer_type(layer)  # by media type, or the early draft's artifactType
        layers.append(
            {
                "kind": kind.kind.value if kind else "-",
                "variant": kind.variant.value if kind else "-",
                "path": layer_path(layer),
                "size": layer.size,
                "mediaType": layer.mediaType,
                "digest": layer.digest,
            }
        )
    return {
        "digest": desc.digest,
        "mediaType": desc.mediaType,
        "artifactType": manifest.artifactType,
        "size": desc.size,
        "annotations": manifest.annotations or {},
        "config": config,
        "configDescriptor": manifest.config.model_dump(exclude_none=True),
        "layers": layers,
        "totalSize": sum(x.size for x in manifest.layers),
        **({"files": 0} if is_empty_model(manifest.layers) else {}),  # its one layer is the empty descriptor
    }


#: fields a person reading the summary does not need (``--json`` keeps them)
_DIGEST_KEYS = ("digest", "diffId")


def _field_lines(label: str, value: Any) -> list[str]:
    """A mapping one line per key, a list one line per element, digests left to ``--json``."""
    if isinstance(value, dict):
        return [f"{label}.{k}: {_value(v)}" for k, v in value.items() if k not in _DIGEST_KEYS]
    if isinstance(value, list):
        return [f"{label}[{i}]: {_value(v)}" for i, v in enumerate(value)]
    return [f"{label}: {_value(value)}"]


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _DIGEST_KEYS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _value(value: Any) -> str:
    value = _strip(value)
    return value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))


#: convert's round-trip records (io.ocibridge.origin.<family>.manifest / .config): whole JSON
#: documents, a screenful each; the text names them by size (--json carries them whole)
_ORIGIN_PREFIX = "io.ocibridge.origin."


def _shown_annotation(key: str, value: str) -> str:
    if key.startswith(_ORIGIN_PREFIX) and not key.endswith(".of"):
        return f"({len(value.encode())} bytes: the source's {key.rsplit('.', 1)[-1]}, restored by converting back)"
    return value


def format_inspect(info: dict[str, Any]) -> str:
    lines = [
        *([f"Family:        {info['familyName']}"] if info.get("familyName") else []),
        f"Digest:        {info['digest']}",
        f"Media type:    {info['mediaType']}",
        f"Artifact type: {info['artifactType'] or '-'}",
        *([f"Holds:         a {info['repoType']} (pull it into the Hugging Face cache as "
           f"hf:{info['repoType']}s/ORG/NAME)"] if info.get("repoType") else []),
        f"Layers:        {human_size(info['totalSize'])} in {len(info['layers'])} layers",  # config, manifest not in
        *(["Files:         0 (a model of no files: its one layer is the OCI empty descriptor)"]
          if info.get("files") == 0 else []),
    ]
    config = info.get("config") or {}
    own = info.get("familyFields")
    if own:  # a family's own fields, under its own names (a Kitfile's package, model, code ...)
        for key, value in own["fields"].items():
            lines += _field_lines(f"{own['label']} {key}", value)
    elif isinstance(config, dict):
        for section in ("descriptor", "config"):
            for key, value in (config.get(section) or {}).items():
                lines.append(f"{section}.{key}: {_value(value)}")
    for key, value in sorted(info["annotations"].items()):
        lines.append(f"annotation {key}: {_shown_annotation(key, value)}")
    for found in info.get("attestations") or []:  # claimed types: `verify --attestation-type` checks them
        how = "attestation (signed)" if found["signed"] else "evidence (unsigned)"
        lines.append(f"{how}: {found['predicateType']} {found['digest']}")
    scan = info.get("scan")
    if scan:  # the newest report, as attached (verify or the policy checks its signature)
        finding = f": {scan['finding']}" if scan.get("finding") else ""
        lines.append(f"Scan:          {scan['verdict']} ({scan['scannedAt']}, {scan['scanner']}, "
                     f"{'signed' if scan['signed'] else 'unsigned'}){finding}")
    rows = [("KIND", "VARIANT", "SIZE", "PATH", "MEDIA TYPE")]
    rows += [
        (x["kind"], x["variant"], human_size(x["size"]), x["path"] or "-", x["mediaType"])
        for x in info["layers"]
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [one_line(line) for line in lines]  # a value holding a newline prints no line of its own
    lines.append("")
    for r in rows:
        lines.append(one_line("  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4]))
    return "\n".join(lines)

