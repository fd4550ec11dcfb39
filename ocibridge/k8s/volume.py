"""``k8s volume``: a Pod (or a volume + volumeMount snippet) that mounts a model by digest.

The reference is pinned by digest, so ``pullPolicy: IfNotPresent`` is exact (a digest never
changes what it names) and cheap. The mount is read-only; a ModelCar image is mounted with
``subPath: models`` (image-volume subPath needs Kubernetes 1.33 and containerd 2.2). The YAML
is written by PyYAML (:mod:`ocibridge.core.yamldocs`); ``--json`` prints the same document as JSON.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ocibridge.core.yamldocs import comments, dump_all
from ocibridge.errors import InvalidReference, OcibridgeError
from ocibridge.k8s.check import MODELCAR_ROOT, check
from ocibridge.k8s.runtime import DEFAULT_PLATFORM, Runtime, RuntimeVersion, select
from ocibridge.kinds.modelcar.build import SOURCE_ANNOTATION
from ocibridge.oci.reference import RegistryReference
from ocibridge.places.locate import Locator, Role, locate, text_of
from ocibridge.stores.base import Store
from ocibridge.stores.registry.pull_secret import check_secret_name

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
DEFAULT_IMAGE = "busybox:1.36"


def needs(rv: RuntimeVersion, sub_path: bool) -> str:
    """The runtime versions a pod with this volume needs, for the header comment."""
    if rv.runtime is Runtime.CRIO:
        return "CRI-O >= 1.33 for artifacts (1.31 for images)" + (", 1.33 for subPath" if sub_path else "")
    return "containerd >= 2.1 (images only)" + (", 2.2 for subPath" if sub_path else "")


def pinned_reference(located: str | Locator, digest: str) -> RegistryReference:
    """``host/repo@sha256:…`` of a registry reference (a text is located here, the API's edge);
    a node cannot pull from a layout."""
    located = locate(located, Role.MODEL)
    if not isinstance(located, RegistryReference):
        raise OcibridgeError(f"{text_of(located)} is not a registry reference; "
                             "push it to a registry a node can pull from")
    return RegistryReference(located.registry, located.repository, None, digest)


def _check_inputs(ref: RegistryReference, mount_path: str, names: list[str], sub_path: str | None) -> None:
    if ref.digest is None or ref.tag is not None:
        raise InvalidReference(f"{ref.text!r} is not pinned by digest (host/repo@sha256:…)")
    if not mount_path.startswith("/") or ".." in mount_path.split("/"):
        raise OcibridgeError(f"mount path {mount_path!r} must be absolute without '..'")
    for name in names:
        if not _NAME_RE.match(name):
            raise OcibridgeError(f"{name!r} is not a valid Kubernetes name (lowercase, digits, '-')")
    if sub_path is not None and (sub_path.startswith("/") or ".." in sub_path.split("/")):
        raise OcibridgeError(f"subPath {sub_path!r} must be relative without '..'")


def pod_document(
    reference_pinned_by_digest: str | Locator,
    *,
    mount_path: str = "/models",
    name: str = "model-consumer",
    image: str = DEFAULT_IMAGE,
    sub_path: str | None = None,
    snippet: bool = False,
    volume_name: str = "model",
    pull_secrets: Sequence[str] = (),
) -> dict[str, Any]:
    """The Pod (or, with ``snippet``, ``volumes`` + ``volumeMounts`` to paste) as a mapping.
    ``pull_secrets`` name the Secrets kubelet pulls the image volume (and the container) with:
    a registry that needs auth fails the pull without them."""
    pinned = locate(reference_pinned_by_digest, Role.REGISTRY)  # the API's edge (a text is located once)
    assert isinstance(pinned, RegistryReference)
    _check_inputs(pinned, mount_path, [name, volume_name], sub_path)
    ref = str(pinned)
    for secret in pull_secrets:
        check_secret_name("--image-pull-secret", secret)
    pulls = [{"name": s} for s in dict.fromkeys(pull_secrets)]
    mount: dict[str, Any] = {"name": volume_name, "mountPath": mount_path, "readOnly": True}
    if sub_path:
        mount["subPath"] = sub_path
    volume = {"name": volume_name, "image": {"reference": ref, "pullPolicy": "IfNotPresent"}}
    if snippet:
        return {"volumes": [volume], "volumeMounts": [mount], **({"imagePullSecrets": pulls} if pulls else {})}
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "consumer", "image": image, "command": ["sleep", "infinity"],
                            "volumeMounts": [mount]}],
            "volumes": [volume],
        },
    }
    if pulls:
        pod["spec"]["imagePullSecrets"] = pulls
    return pod


def pod_header(
    reference_pinned_by_digest: str | Locator,
    *,
    runtime: str | Runtime | RuntimeVersion,
    sub_path: str | None = None,
    pull_secrets: Sequence[str] = (),
    files_at: str | None = None,
) -> str:
    """The comment lines above the Pod: what the cluster and runtime need and, with ``files_at``,
    where the model's files appear in the container."""
    rv = RuntimeVersion.parse(runtime)
    header = [
        f"Image volume for {text_of(locate(reference_pinned_by_digest, Role.REGISTRY))}",
        f"Needs Kubernetes >= 1.31 with the ImageVolume feature gate on (beta from 1.33, GA and on by "
        f"default from 1.36){', subPath needs >= 1.33' if sub_path else ''}; runtime: "
        f"{needs(rv, bool(sub_path))}.",
    ]
    if files_at:
        header.append(f"On {rv.label}: {files_at}")
    if not pull_secrets:
        header.append("No imagePullSecrets: add --image-pull-secret NAME if the registry needs credentials.")
    return comments(header)


def pod_yaml(reference_pinned_by_digest: str | Locator, *, runtime: str | Runtime | RuntimeVersion,
             files_at: str | None = None, **pod: Any) -> str:
    """:func:`pod_document` as YAML (``pod``: its keywords, ``sub_path``, ``pull_secrets``,
    ``mount_path``, ``name``, ``image``, ``snippet``, ``volume_name``), headed by :func:`pod_header`."""
    runtime = RuntimeVersion.parse(runtime)  # a bad runtime is said first
    doc = pod_document(reference_pinned_by_digest, **pod)
    header = pod_header(reference_pinned_by_digest, runtime=runtime, sub_path=pod.get("sub_path"),
                        pull_secrets=pod.get("pull_secrets", ()), files_at=files_at)
    return header + dump_all([doc])


def files_at(rv: RuntimeVersion, kind: str, modelcar: bool, mount_path: str, sub_path: str | None) -> str:
    """Where the files land in the container, said in the YAML so nobody has to guess."""
    if modelcar and sub_path:
        return f"the model's files are directly under {mount_path} (subPath {sub_path})."
    if modelcar:
        return (f"the model's files are under {mount_path.rstrip('/')}/{MODELCAR_ROOT}, not {mount_path}: "
                f"{rv.label} has no image-volume subPath (containerd 2.2 and CRI-O 1.33 have).")
    if kind == "image":
        return f"the image's file tree is at {mount_path}."
    return f"each layer's file is at {mount_path} under its title (org.opencontainers.image.title)."


def volume_document(
    store: Store,
    reference: str,
    located: str | Locator,
    *,
    runtime: str | Runtime | RuntimeVersion,
    platform: str = DEFAULT_PLATFORM,
    **pod: object,
) -> tuple[dict[str, Any], RuntimeVersion, RegistryReference, str | None, str]:
    """Resolve ``reference`` in ``store``, refuse what ``runtime`` would not mount, pin by
    digest and choose the subPath (``models`` for a ModelCar image, where the runtime has
    subPath). Returns the document, the runtime, the pinned reference, the subPath and where
    the files land in the container."""
    rv = RuntimeVersion.parse(runtime)
    located = locate(located, Role.MODEL)  # the API's edge: a text is located once, a locator passes
    digest = store.resolve(reference).digest  # once: what is checked is what the Pod pins
    result = check(store, digest, rv, platform=platform, read_layers=False)
    if result.reasons:
        raise OcibridgeError(f"{rv.label} would not mount {text_of(located)}: {result.reasons[0]}")
    sel = select(store, digest, platform)
    sub_path = None
    if result.kind == "image" and SOURCE_ANNOTATION in (sel.manifest.annotations or {}) and rv.has_sub_path:
        sub_path = MODELCAR_ROOT
    pinned = pinned_reference(located, sel.top.digest)
    modelcar = result.kind == "image" and SOURCE_ANNOTATION in (sel.manifest.annotations or {})
    where = files_at(rv, result.kind, modelcar, str(pod.get("mount_path", "/models")), sub_path)
    doc = pod_document(pinned, sub_path=sub_path, **pod)  # type: ignore[arg-type]
    return doc, rv, pinned, sub_path, where


def volume_yaml(
    store: Store,
    reference: str,
    located: str | Locator,
    *,
    runtime: str | Runtime | RuntimeVersion,
    mount_path: str = "/models",
    name: str = "model-consumer",
    image: str = DEFAULT_IMAGE,
    snippet: bool = False,
    platform: str = DEFAULT_PLATFORM,
    pull_secrets: Sequence[str] = (),
) -> str:
    """:func:`volume_document` as YAML with its header."""
    doc, rv, pinned, sub_path, where = volume_document(
        store, reference, located, runtime=runtime, platform=platform,
        mount_path=mount_path, name=name, image=image, snippet=snippet, pull_secrets=pull_secrets,
    )
    return pod_header(pinned, runtime=rv, sub_path=sub_path, pull_secrets=pull_secrets, files_at=where) \
        + dump_all([doc])
