"""``k8s prewarm``: a DaemonSet that makes every selected node pull models before a workload needs them.

A cluster that scales a deployment to 50 nodes makes each kubelet pull a multi-GB image at pod
start. Operators prewarm images with a DaemonSet; this one is made for models, pinned by digest:

- **image volumes** (Kubernetes with the ImageVolume feature, a runtime that has them: CRI-O
  1.31+, containerd 2.1+): each model is an image volume (as ``k8s volume`` writes it) of a
  minimal container (``busybox`` sleeping). kubelet starts a container only once every volume
  of its pod is set up, and an image volume is set up by pulling it: the pod turns Ready when
  the node holds every model (its readiness probe lists each mount as well);
- **ModelCar images** (any other cluster): each model's ModelCar image is an init container,
  which kubelet pulls before running it. A ModelCar image has no shell, so a first init
  container copies busybox's static binary into an ``emptyDir`` and each model's init container
  runs ``busybox true`` from there; the pod is Ready once every init container ran, so once
  every image was pulled.

With a compile-cache step (:mod:`.prewarm_warm`), each node also restores the models' compile
caches, verified, into a directory the engine's pods mount. The pod keeps running (asking for
1m of CPU and 8 MiB of memory), so the node's image garbage
collection sees each model in use and keeps it. ``kubectl rollout status ds/NAME`` waits until
every selected node holds every model.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ocibridge.errors import OcibridgeError, UsageError
from ocibridge.k8s import node_mirrors
from ocibridge.k8s.prewarm_warm import HOST_ROOT, WarmStep, add_warm_step
from ocibridge.k8s.runtime import DEFAULT_PLATFORM, Runtime, RuntimeVersion, select
from ocibridge.k8s.volume import DEFAULT_IMAGE, pinned_reference, volume_document
from ocibridge.oci.reference import RegistryReference
from ocibridge.places.locate import Locator, text_of
from ocibridge.stores.base import Store
from ocibridge.stores.registry.pull_secret import check_secret_name

Mode = Literal["volume", "modelcar"]
DEFAULT_NAME = "model-prewarm"
MOUNT_ROOT = "/prewarm"
TOOLS_DIR = "/prewarm-tools"
#: busybox of the official image is statically linked: it runs inside an image with no libc
BUSYBOX = "/bin/busybox"
#: nobody: the pod runs as no one in particular, read-only, with no capability
USER = 65534
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
_LABEL_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)\Z")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?)\Z")
#: a ModelCar prewarm's gate: every file the mirrors' installer writes is on the node
WAIT_FOR_FILES = 'for f in "$@"; do until [ -f "/host/$f" ]; do sleep 2; done; done'
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")


@dataclass(frozen=True)
class Model:
    """One model to prewarm: the store it is read from, its reference there, and where it was
    located (a registry reference: the node pulls it)."""

    store: Store
    reference: str
    located: Locator


@dataclass
class Prewarm:
    """The DaemonSet and what its header says."""

    daemonset: dict[str, Any]
    pinned: list[RegistryReference]
    mode: Mode
    runtime: RuntimeVersion
    notes: list[str]
    #: the registries.toml mirrors carried to the nodes (k8s/node_mirrors.py), printed first
    node_documents: list[dict[str, Any]] = field(default_factory=list)

    def header(self) -> list[str]:
        name = self.daemonset["metadata"]["name"]
        ns = self.daemonset["metadata"].get("namespace")
        watch = f"kubectl rollout status ds/{name}" + (f" -n {ns}" if ns else "")
        how = ("image volumes (Kubernetes with ImageVolume on: beta from 1.33, on by default from 1.36)"
               if self.mode == "volume" else "ModelCar images as init containers")
        lines = [f"Prewarm: every selected node pulls {len(self.pinned)} model(s) by digest, as {how}, "
                 f"on {self.runtime.label}:"]
        lines += [f"  {p}" for p in self.pinned]
        lines.append(f"A node's pod is Ready once the node holds them all; wait for every node: {watch}")
        lines += list(self.notes)
        return lines


def check_selector(pairs: Sequence[str]) -> dict[str, str]:
    """``--selector k=v`` (repeatable) as a nodeSelector; one error line for a bad label."""
    selector: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        prefix, slash, name = key.rpartition("/")
        if not eq or not _LABEL_NAME.match(name) or (slash and not _DNS_SUBDOMAIN.match(prefix)) \
                or not _LABEL_VALUE.match(value):
            raise UsageError(f"--selector {pair!r} is not a node label KEY=VALUE "
                             "(kubernetes.io/arch=amd64, node.kubernetes.io/instance-type=g5.xlarge)")
        selector[key] = value
    return selector


def prewarm_daemonset(
    models: Sequence[Model],
    *,
    runtime: str | Runtime | RuntimeVersion = Runtime.CRIO,
    platform: str = DEFAULT_PLATFORM,
    mode: Mode | None = None,
    name: str = DEFAULT_NAME,
    namespace: str | None = None,
    selector: Mapping[str, str] | None = None,
    image: str = DEFAULT_IMAGE,
    pull_secrets: Sequence[str] = (),
    node_mirrors: bool = True,
    warm: WarmStep | None = None,
) -> Prewarm:
    """The DaemonSet prewarming ``models`` on the nodes ``selector`` picks (all by default):
    as image volumes when ``runtime`` has them (``mode`` says otherwise), else as ModelCar
    images. Each model is resolved once and pinned by digest; one the runtime would not mount
    (or, for ``modelcar``, that is no image) is refused with the reason. ``node_mirrors``: the
    registries.toml mirrors of the models' registries go to the nodes too (k8s/node_mirrors.py).
    ``warm``: each node restores the models' compile caches too (k8s/prewarm_warm.py)."""
    rv = RuntimeVersion.parse(runtime)
    if not models:
        raise UsageError("k8s prewarm needs at least one model reference")
    if not _DNS_LABEL.match(name):
        raise UsageError(f"--name {name!r} is not a valid Kubernetes name (lowercase, digits, '-')")
    if namespace is not None and not _DNS_LABEL.match(namespace):
        raise UsageError(f"--namespace {namespace!r} is not a valid Kubernetes name")
    if not image or any(c.isspace() or not c.isprintable() for c in image):
        raise UsageError(f"--image {image!r} is not an image reference")
    for secret in pull_secrets:
        check_secret_name("--image-pull-secret", secret)
    mode = mode or ("volume" if rv.has_image_volumes else "modelcar")
    if mode == "volume" and not rv.has_image_volumes:
        raise OcibridgeError(f"{rv.label} has no image volumes (CRI-O 1.31, containerd 2.1 have): "
                             "prewarm the ModelCar image instead (--mode modelcar)")
    labels = {"app.kubernetes.io/name": "ocibridge-prewarm", "app.kubernetes.io/instance": name}
    notes: list[str] = []
    pinned: list[RegistryReference] = []
    hold: dict[str, Any] = {
        "name": "hold", "image": image, "command": ["sleep", "infinity"],
        "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {"memory": "16Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
    }
    spec: dict[str, Any] = {
        "securityContext": {"runAsNonRoot": True, "runAsUser": USER, "runAsGroup": USER,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 1,  # sleep ignores SIGTERM as PID 1: nothing to wait for
    }
    if mode == "volume":
        volumes, mounts = [], []
        for n, model in enumerate(models):
            doc, _, ref, _, where = volume_document(
                model.store, model.reference, model.located, runtime=rv, platform=platform, snippet=True,
                volume_name=f"model-{n}", mount_path=f"{MOUNT_ROOT}/{n}")
            volumes += doc["volumes"]
            mounts += doc["volumeMounts"]
            pinned.append(ref)
            notes.append(f"{MOUNT_ROOT}/{n}: {ref.repository}: {where}")
        hold["volumeMounts"] = mounts
        # the container starts only after every volume was pulled and mounted; the probe says so too
        hold["readinessProbe"] = {"exec": {"command": ["ls", *(m["mountPath"] for m in mounts)]},
                                  "periodSeconds": 30}
        spec["volumes"] = volumes
    else:
        tools = {"name": "tools", "mountPath": TOOLS_DIR, "readOnly": True}
        inits: list[dict[str, Any]] = [{
            "name": "tools", "image": image, "command": ["cp", BUSYBOX, f"{TOOLS_DIR}/busybox"],
            "volumeMounts": [{**tools, "readOnly": False}],
            "resources": hold["resources"], "securityContext": hold["securityContext"],
        }]
        for n, model in enumerate(models):
            ref = _modelcar(model, platform)
            pinned.append(ref)
            inits.append({"name": f"model-{n}", "image": str(ref), "imagePullPolicy": "IfNotPresent",
                          "command": [f"{TOOLS_DIR}/busybox", "true"], "volumeMounts": [tools],
                          "resources": hold["resources"], "securityContext": hold["securityContext"]})
        spec["initContainers"] = inits
        spec["volumes"] = [{"name": "tools", "emptyDir": {"sizeLimit": "16Mi"}}]
    carried = _carry_mirrors(pinned, rv, mode, name, namespace, image, selector, spec, hold) if node_mirrors \
        else ([], [])
    notes[:0] = carried[1]
    if warm is not None:
        warm = dataclasses.replace(warm, host_path=warm.host_path or f"{HOST_ROOT}/{name}")
        refs = [str(pinned_reference(m.located, m.store.resolve(m.reference).digest)) for m in models]
        notes += add_warm_step(spec, warm, refs, pull_secret=pull_secrets[0] if pull_secrets else None)
    spec["containers"] = [hold]
    if selector:
        spec["nodeSelector"] = dict(selector)
    if pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in dict.fromkeys(pull_secrets)]
    else:
        notes.append("No imagePullSecrets: add --image-pull-secret NAME if the registry needs credentials.")
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    daemonset = {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta,
        "spec": {
            "selector": {"matchLabels": labels},
            # a new model list replaces every node's pod at once: all nodes pull in parallel
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }
    return Prewarm(daemonset, pinned, mode, rv, notes, carried[0])


def _carry_mirrors(pinned: list[RegistryReference], rv: RuntimeVersion, mode: Mode, name: str,
                   namespace: str | None, image: str, selector: Mapping[str, str] | None,
                   spec: dict[str, Any], hold: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The documents installing the models' registries.toml mirrors on the nodes, and the
    header's lines. A ModelCar prewarm waits for the files before its first model's pull (init
    containers run, and pull, in order); image volumes are pulled before any container starts,
    so the header says to wait for that DaemonSet first."""
    found = node_mirrors.mirrors_of(p.registry for p in pinned)
    if not found:
        return [], []
    installer_name = f"{name[:55].rstrip('-')}-mirrors"
    labels = {"app.kubernetes.io/name": "ocibridge-node-mirrors", "app.kubernetes.io/instance": installer_name}
    documents = node_mirrors.installer(found, rv, name=installer_name, namespace=namespace, image=image,
                                       labels=labels, selector=dict(selector) if selector else None)
    lines = node_mirrors.notes(found, rv, installer_name)
    directory, files = node_mirrors.node_files(found, rv, installer_name)
    if mode == "modelcar":
        spec["initContainers"].insert(1, {
            "name": "mirrors", "image": image, "command": ["sh", "-c", WAIT_FOR_FILES, "wait", *sorted(files)],
            "volumeMounts": [{"name": "node-mirrors", "mountPath": "/host", "readOnly": True}],
            "resources": hold["resources"], "securityContext": hold["securityContext"]})
        spec["volumes"].append({"name": "node-mirrors", "hostPath": {"path": directory, "type": "DirectoryOrCreate"}})
    else:
        watch = f"kubectl rollout status ds/{installer_name}" + (f" -n {namespace}" if namespace else "")
        lines.append(f"Image volumes are pulled before any container starts: apply the {installer_name} "
                     f"documents first and wait ({watch}), then the prewarm DaemonSet")
    return documents, lines


def _modelcar(model: Model, platform: str) -> RegistryReference:
    """The model's image pinned by digest; an artifact that is no image cannot be a container."""
    digest = model.store.resolve(model.reference).digest  # once: what is checked is what is pinned
    sel = select(model.store, digest, platform)
    if not sel.is_image:
        raise OcibridgeError(f"{text_of(model.located)} is no container image (a ModelPack artifact?): build its "
                             "ModelCar image with `ocibridge k8s modelcar REF --tag TAG` and prewarm that, or "
                             "prewarm it as an image volume (--mode volume)")
    return pinned_reference(model.located, sel.top.digest)
