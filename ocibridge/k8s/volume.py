"""``k8s volume``: a Pod (or a volume + volumeMount snippet) that mounts a model by digest.

The reference is pinned by digest, so ``pullPolicy: IfNotPresent`` is exact (a digest never
changes what it names) and cheap. The mount is read-only; a ModelCar image is mounted with
``subPath: models`` (image-volume subPath needs Kubernetes 1.33 and containerd 2.2). The YAML
is written by a ten-line renderer for this one shape, every scalar JSON-quoted, so no YAML
library is needed at run time; ``--json`` prints the same document as JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ocibridge.errors import InvalidReference, OcibridgeError
from ocibridge.k8s.check import MODELCAR_ROOT, check
from ocibridge.k8s.runtime import DEFAULT_PLATFORM, Runtime, RuntimeVersion, select
from ocibridge.kinds.modelcar.build import SOURCE_ANNOTATION
from ocibridge.oci.digest import is_digest
from ocibridge.oci.reference import is_layout_reference, is_ollama_reference, parse_registry_reference
from ocibridge.stores.base import Store

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
DEFAULT_IMAGE = "busybox:1.36"


def needs(rv: RuntimeVersion, sub_path: bool) -> str:
    """The runtime versions a pod with this volume needs, for the header comment."""
    if rv.runtime is Runtime.CRIO:
        return "CRI-O >= 1.33 for artifacts (1.31 for images)" + (", 1.33 for subPath" if sub_path else "")
    return "containerd >= 2.1 (images only)" + (", 2.2 for subPath" if sub_path else "")


def pinned_reference(text: str, digest: str) -> str:
    """``host/repo@sha256:…`` for a registry reference; a node cannot pull from a layout."""
    if is_layout_reference(text) or is_ollama_reference(text):
        raise OcibridgeError(f"{text} is not a registry reference; push it to a registry a node can pull from")
    ref = parse_registry_reference(text)
    return f"{ref.registry}/{ref.repository}@{digest}"


def _check_inputs(reference: str, mount_path: str, names: list[str], sub_path: str | None) -> None:
    head, _, digest = reference.rpartition("@")
    if not head or not is_digest(digest) or "oci:" in head:
        raise InvalidReference(f"{reference!r} is not pinned by digest (host/repo@sha256:…)")
    parse_registry_reference(reference)
    if not mount_path.startswith("/") or ".." in mount_path.split("/"):
        raise OcibridgeError(f"mount path {mount_path!r} must be absolute without '..'")
    for name in names:
        if not _NAME_RE.match(name):
            raise OcibridgeError(f"{name!r} is not a valid Kubernetes name (lowercase, digits, '-')")
    if sub_path is not None and (sub_path.startswith("/") or ".." in sub_path.split("/")):
        raise OcibridgeError(f"subPath {sub_path!r} must be relative without '..'")


def pod_document(
    reference_pinned_by_digest: str,
    *,
    mount_path: str = "/models",
    name: str = "model-consumer",
    image: str = DEFAULT_IMAGE,
    sub_path: str | None = None,
    snippet: bool = False,
    volume_name: str = "model",
) -> dict[str, Any]:
    """The Pod (or, with ``snippet``, ``volumes`` + ``volumeMounts`` to paste) as a mapping."""
    ref = reference_pinned_by_digest
    _check_inputs(ref, mount_path, [name, volume_name], sub_path)
    mount: dict[str, Any] = {"name": volume_name, "mountPath": mount_path, "readOnly": True}
    if sub_path:
        mount["subPath"] = sub_path
    volume = {"name": volume_name, "image": {"reference": ref, "pullPolicy": "IfNotPresent"}}
    if snippet:
        return {"volumes": [volume], "volumeMounts": [mount]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "consumer", "image": image, "command": ["sleep", "infinity"],
                            "volumeMounts": [mount]}],
            "volumes": [volume],
        },
    }


def _render(value: object, indent: str = "") -> list[str]:
    """Block YAML for mappings and lists of mappings; every scalar JSON-quoted (JSON is YAML)."""
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict) or (isinstance(item, list) and item and isinstance(item[0], dict)):
                lines.append(f"{indent}{key}:")
                lines.extend(_render(item, indent + ("  " if isinstance(item, dict) else "")))
            else:
                lines.append(f"{indent}{key}: {json.dumps(item, ensure_ascii=False)}")
    elif isinstance(value, list):
        for item in value:
            inner = _render(item, indent + "  ")
            lines.append(f"{indent}- {inner[0].lstrip()}")
            lines.extend(inner[1:])
    return lines


def pod_yaml(
    reference_pinned_by_digest: str,
    *,
    runtime: str | Runtime | RuntimeVersion,
    mount_path: str = "/models",
    name: str = "model-consumer",
    image: str = DEFAULT_IMAGE,
    sub_path: str | None = None,
    snippet: bool = False,
    volume_name: str = "model",
) -> str:
    """:func:`pod_document` as YAML, headed by what the cluster and runtime need."""
    rv = RuntimeVersion.parse(runtime)
    doc = pod_document(reference_pinned_by_digest, mount_path=mount_path, name=name, image=image,
                       sub_path=sub_path, snippet=snippet, volume_name=volume_name)
    header = [
        f"# Image volume for {reference_pinned_by_digest}",
        f"# Needs Kubernetes >= 1.31 with the ImageVolume feature gate on (beta from 1.33, on by default "
        f"from 1.35){', subPath needs >= 1.33' if sub_path else ''}; runtime: {needs(rv, bool(sub_path))}.",
    ]
    return "\n".join([*header, *_render(doc)]) + "\n"


def volume_document(
    store: Store,
    reference: str,
    reference_text: str,
    *,
    runtime: str | Runtime | RuntimeVersion,
    platform: str = DEFAULT_PLATFORM,
    **pod: object,
) -> tuple[dict[str, Any], RuntimeVersion, str, str | None]:
    """Resolve ``reference`` in ``store``, refuse what ``runtime`` would not mount, pin by
    digest and choose the subPath (``models`` for a ModelCar image, where the runtime has
    subPath). Returns the document, the runtime, the pinned reference and the subPath."""
    rv = RuntimeVersion.parse(runtime)
    digest = store.resolve(reference).digest  # once: what is checked is what the Pod pins
    result = check(store, digest, rv, platform=platform, read_layers=False)
    if result.reasons:
        raise OcibridgeError(f"{rv.label} would not mount {reference_text}: {result.reasons[0]}")
    sel = select(store, digest, platform)
    sub_path = None
    if result.kind == "image" and SOURCE_ANNOTATION in (sel.manifest.annotations or {}) and rv.has_sub_path:
        sub_path = MODELCAR_ROOT
    pinned = pinned_reference(reference_text, sel.top.digest)
    return pod_document(pinned, sub_path=sub_path, **pod), rv, pinned, sub_path  # type: ignore[arg-type]


def volume_yaml(
    store: Store,
    reference: str,
    reference_text: str,
    *,
    runtime: str | Runtime | RuntimeVersion,
    mount_path: str = "/models",
    name: str = "model-consumer",
    image: str = DEFAULT_IMAGE,
    snippet: bool = False,
    platform: str = DEFAULT_PLATFORM,
) -> str:
    """:func:`volume_document` as YAML with its header."""
    _, rv, pinned, sub_path = volume_document(
        store, reference, reference_text, runtime=runtime, platform=platform,
        mount_path=mount_path, name=name, image=image, snippet=snippet,
    )
    return pod_yaml(pinned, runtime=rv, mount_path=mount_path, name=name, image=image,
                    sub_path=sub_path, snippet=snippet)
