"""``k8s volume``: a Pod (or a volume + volumeMount snippet) that mounts a model by digest.

The reference is pinned by digest, so ``pullPolicy: IfNotPresent`` is exact (a digest never
changes what it names) and cheap. The mount is read-only; a ModelCar image is mounted with
``subPath: models`` (image-volume subPath needs Kubernetes 1.33). The YAML is written by hand
for this one fixed shape, every scalar JSON-quoted, so no YAML library is needed at run time.
"""

from __future__ import annotations

import json
import re

from ..errors import InvalidReference, OcibridgeError
from ..oci.digest import is_digest
from ..oci.reference import is_layout_reference, parse_registry_reference
from ..stores.base import Store
from .check import MODELCAR_ROOT, check
from .modelcar import SOURCE_ANNOTATION
from .runtime import DEFAULT_PLATFORM, Runtime, select

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
DEFAULT_IMAGE = "busybox:1.36"
NEEDS = {
    Runtime.CRIO: "CRI-O >= 1.33 for artifacts (any version with image volumes for images)",
    Runtime.CONTAINERD: "containerd 2.x with image-volume support, 2.1 or later (images only)",
}


def pinned_reference(text: str, digest: str) -> str:
    """``host/repo@sha256:…`` for a registry reference; a node cannot pull from a layout."""
    if is_layout_reference(text) or text.startswith("ollama:"):
        raise OcibridgeError(f"{text} is not a registry reference; push it to a registry a node can pull from")
    ref = parse_registry_reference(text)
    return f"{ref.registry}/{ref.repository}@{digest}"


def _q(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


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


def pod_yaml(
    reference_pinned_by_digest: str,
    *,
    runtime: str | Runtime,
    mount_path: str = "/models",
    name: str = "model-consumer",
    image: str = DEFAULT_IMAGE,
    sub_path: str | None = None,
    snippet: bool = False,
    volume_name: str = "model",
) -> str:
    """The Pod YAML (or, with ``snippet``, ``volumes`` + ``volumeMounts`` to paste)."""
    rt = Runtime.parse(runtime)
    ref = reference_pinned_by_digest
    _check_inputs(ref, mount_path, [name, volume_name], sub_path)
    mount = [
        f"- name: {_q(volume_name)}",
        f"  mountPath: {_q(mount_path)}",
        "  readOnly: true",
    ]
    if sub_path:
        mount.append(f"  subPath: {_q(sub_path)}")
    volume = [
        f"- name: {_q(volume_name)}",
        "  image:",
        f"    reference: {_q(ref)}",
        "    pullPolicy: \"IfNotPresent\"",
    ]
    header = [
        f"# Image volume for {ref}",
        f"# Needs Kubernetes >= 1.31 with the ImageVolume feature gate on (beta from 1.33)"
        f"{', subPath needs >= 1.33' if sub_path else ''}; runtime: {NEEDS[rt]}.",
    ]
    if snippet:
        lines = [*header, "volumes:", *volume, "volumeMounts:", *mount]
    else:
        lines = [
            *header,
            "apiVersion: \"v1\"",
            "kind: \"Pod\"",
            "metadata:",
            f"  name: {_q(name)}",
            "spec:",
            "  containers:",
            "  - name: \"consumer\"",
            f"    image: {_q(image)}",
            "    command: [\"sleep\", \"infinity\"]",
            "    volumeMounts:",
            *("    " + line for line in mount),
            "  volumes:",
            *("  " + line for line in volume),
        ]
    return "\n".join(lines) + "\n"


def volume_yaml(
    store: Store,
    reference: str,
    reference_text: str,
    *,
    runtime: str | Runtime,
    mount_path: str = "/models",
    name: str = "model-consumer",
    image: str = DEFAULT_IMAGE,
    snippet: bool = False,
    platform: str = DEFAULT_PLATFORM,
) -> str:
    """Resolve ``reference`` in ``store``, refuse what ``runtime`` would not mount, pin by
    digest and choose the subPath (``models`` for a ModelCar image)."""
    rt = Runtime.parse(runtime)
    result = check(store, reference, rt, platform=platform, read_layers=False)
    if result.reasons:
        raise OcibridgeError(f"{rt.value} would not mount {reference_text}: {result.reasons[0]}")
    sel = select(store, reference, platform)
    sub_path = None
    if sel.is_image and SOURCE_ANNOTATION in (sel.manifest.annotations or {}):
        sub_path = MODELCAR_ROOT
    pinned = pinned_reference(reference_text, sel.top.digest)
    return pod_yaml(
        pinned, runtime=rt, mount_path=mount_path, name=name, image=image,
        sub_path=sub_path, snippet=snippet,
    )
