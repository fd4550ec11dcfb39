"""``k8s mount-daemon``: ``ocibridge mount`` on every node, and a Pod that reads one of its mounts.

A DaemonSet runs one container per model, each ``ocibridge mount REF /models/NAME --foreground
--allow-other``, on a hostPath (``/var/lib/ocibridge/models`` by default) mounted with
``Bidirectional`` propagation, so the FUSE mount made in the container appears on the node
under ``HOSTPATH/NAME``. A workload mounts ``HOSTPATH/NAME`` with ``HostToContainer``
propagation: it sees the model as soon as the daemon has mounted it, and again after the daemon
restarts. What it needs: a privileged container (mount(2) and Bidirectional propagation need
it), the node's ``/dev/fuse``, and the model cache on a hostPath of its own, so a restarted
daemon fetches nothing again. Compared with an image volume, the first byte comes in seconds
(only the chunks read move), where an image volume waits for the whole pull (docs/kubernetes.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ocibridge.core import environment
from ocibridge.errors import UsageError
from ocibridge.stores.registry import pull_secret as secrets

#: where the models are mounted in the daemon's containers and in the reader Pod
MODELS_DIR = "/models"
CACHE_DIR = "/var/cache/ocibridge"


@dataclass(frozen=True)
class MountedModel:
    """One model of the daemon: the directory name under the host path, and its reference."""

    name: str
    ref: str


@dataclass
class MountDaemon:
    """What ``k8s mount-daemon``'s flags set."""

    models: Sequence[MountedModel]
    image: str
    name: str = "ocibridge-mounts"
    namespace: str | None = None
    host_path: str = "/var/lib/ocibridge/models"
    cache_host_path: str = "/var/cache/ocibridge"
    plain_http: bool = False
    insecure: bool = False
    docker_config_secret: str | None = None
    image_pull_secrets: Sequence[str] = ()
    reader_image: str = "busybox:1.36"
    selector: dict[str, str] = field(default_factory=dict)


def model_of(text: str) -> MountedModel:
    """``NAME=REF``, or ``REF`` named by its repository's last part and its tag (``llama-v1``)."""
    name, sep, ref = text.partition("=")
    if not sep or "/" in name:
        ref = text
        last = text.split("@")[0].rsplit("/", 1)[-1]
        repo, _, tag = last.partition(":")
        name = "-".join(p for p in (repo, tag) if p)
    name = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    if not name or not ref:
        raise UsageError(f"{text!r}: expected REF or NAME=REF")
    return MountedModel(name[:50].strip("-"), ref)


def check(d: MountDaemon) -> None:
    if not d.models:
        raise UsageError("k8s mount-daemon needs at least one REF (or NAME=REF)")
    names = [m.name for m in d.models]
    if len(set(names)) != len(names):
        raise UsageError(f"two models are named {next(n for n in names if names.count(n) > 1)!r}: give NAME=REF")
    secrets.check_label("--name", d.name)
    if d.namespace is not None:
        secrets.check_label("--namespace", d.namespace)
    for flag, path in (("--host-path", d.host_path), ("--cache-host-path", d.cache_host_path)):
        if not path.startswith("/") or ".." in path.split("/"):
            raise UsageError(f"{flag} {path!r}: an absolute path on the node")
    for image in (d.image, d.reader_image):
        if not image or any(c.isspace() or not c.isprintable() for c in image):
            raise UsageError(f"{image!r} is not an image reference")
    for name in (d.docker_config_secret, *d.image_pull_secrets):
        if name is not None:
            secrets.check_secret_name("--docker-config-secret/--image-pull-secret", name)


def mount_args(d: MountDaemon, model: MountedModel) -> list[str]:
    """One container's command line (the image's entrypoint is ``ocibridge``)."""
    args = ["mount", model.ref, f"{MODELS_DIR}/{model.name}", "--foreground", "--allow-other"]
    if d.plain_http:
        args.append("--plain-http")
    if d.insecure:
        args.append("--insecure")
    return args


def objects(d: MountDaemon) -> list[dict[str, Any]]:
    """The DaemonSet, then a Pod reading the first model through the node's mount."""
    check(d)
    labels = {"app.kubernetes.io/name": "ocibridge-mounts", "app.kubernetes.io/instance": d.name}
    meta: dict[str, Any] = {"name": d.name, "labels": labels}
    if d.namespace:
        meta["namespace"] = d.namespace
    return [_daemon_set(d, meta, labels), _reader(d, meta)]


def _daemon_set(d: MountDaemon, meta: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    mounts: list[dict[str, Any]] = [
        {"name": "models", "mountPath": MODELS_DIR, "mountPropagation": "Bidirectional"},
        {"name": "cache", "mountPath": CACHE_DIR}, {"name": "fuse", "mountPath": "/dev/fuse"}]
    env: list[dict[str, Any]] = [{"name": environment.CACHE, "value": CACHE_DIR}, {"name": "HOME", "value": "/tmp"}]
    volumes: list[dict[str, Any]] = [
        {"name": "models", "hostPath": {"path": d.host_path, "type": "DirectoryOrCreate"}},
        {"name": "cache", "hostPath": {"path": d.cache_host_path, "type": "DirectoryOrCreate"}},
        {"name": "fuse", "hostPath": {"path": "/dev/fuse", "type": "CharDevice"}}]
    if d.docker_config_secret:
        volume, mount, var = secrets.docker_config_mount(d.docker_config_secret)
        volumes.append(volume)
        mounts.append(mount)
        env.append(var)
    containers = [{
        "name": f"mount-{model.name}"[:63].rstrip("-"),
        "image": d.image,
        "args": mount_args(d, model),
        "env": env,
        # mount(2) on /dev/fuse and a mount that propagates to the node need a privileged container,
        # as root (the image's own user is not)
        "securityContext": {"privileged": True, "runAsUser": 0},
        "volumeMounts": mounts,
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
    } for model in d.models]
    pod: dict[str, Any] = {
        "containers": containers,
        "volumes": volumes,
        # SIGTERM: each container unmounts its model before it exits
        "terminationGracePeriodSeconds": 30,
    }
    if d.selector:
        pod["nodeSelector"] = dict(d.selector)
    if d.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in dict.fromkeys(d.image_pull_secrets)]
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta, "spec": {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": pod}}}


def _reader(d: MountDaemon, meta: dict[str, Any]) -> dict[str, Any]:
    """A Pod that uses the node's mount of the first model, read-only."""
    first = d.models[0]
    where = f"{MODELS_DIR}/{first.name}"
    pod_meta = {**meta, "name": f"{d.name}-reader", "labels": {"app.kubernetes.io/name": "ocibridge-model-reader"}}
    pod: dict[str, Any] = {
        "containers": [{
            "name": "reader",
            "image": d.reader_image,
            "command": ["sh", "-c", f"ls -l {where} && sleep 3600"],
            # HostToContainer: the daemon's mount (made after this pod started, or again after a
            # restart) shows up here
            "volumeMounts": [{"name": "model", "mountPath": where, "readOnly": True,
                              "mountPropagation": "HostToContainer"}],
        }],
        "volumes": [{"name": "model", "hostPath": {"path": f"{d.host_path}/{first.name}",
                                                    "type": "DirectoryOrCreate"}}],
    }
    if d.selector:
        pod["nodeSelector"] = dict(d.selector)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod}


def header(d: MountDaemon) -> str:
    """The comment lines above the YAML: where each model appears on the nodes."""
    from ocibridge.core.yamldocs import comments

    nodes = "every node" + (" labelled " + ", ".join(f"{k}={v}" for k, v in d.selector.items()) if d.selector else "")
    lines = [f"ocibridge mount on {nodes}: {len(d.models)} model(s) under {d.host_path}",
             *(f"  {d.host_path}/{m.name}: {m.ref}" for m in d.models),
             "Needs a privileged container and the node's /dev/fuse; a workload mounts HOST-PATH/NAME",
             "with mountPropagation: HostToContainer (as the Pod below)"]
    return comments(lines)
