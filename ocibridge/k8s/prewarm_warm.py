"""A prewarm's compile-cache step: besides the weights, each node restores the models' compile
caches (``ocibridge warm load``, docs/warm.md) into a directory of its own (a hostPath) that the
engine's pods mount at their cache directory, so the engine's first start on the node is warm.

The step is an init container per model in the engine's own image (with ocibridge installed, as
the vLLM plugin is): the cache's key names the engine's, torch's and CUDA's versions, so they
are read where the engine runs, not where this command does. The device's architecture and
driver are read from the node's GPU: the container asks the NVIDIA runtime for the node's
devices (``NVIDIA_VISIBLE_DEVICES``) rather than allocating one, which a DaemonSet's pod would
then hold for as long as it runs. A cache is code that runs: it is restored only once its
signature verifies with the public key a Secret or ConfigMap holds. A warm start is an
optimisation, so a step that restores nothing (no cache for the node's key, a refusal) says so
in its log and the pod goes on: the weights' prewarm is never held up by it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ocibridge.errors import UsageError
from ocibridge.stores.registry.pull_secret import check_secret_name, docker_config_mount

#: where the init container sees the node's cache directory, the key and its temporary files
CACHE_DIR = "/warm-cache"
KEY_DIR = "/warm-key"
TMP_DIR = "/tmp"
#: the node's directory for the caches, under which each prewarm keeps its own
HOST_ROOT = "/var/lib/ocibridge/warm"
#: a failed restore is a line in the log, not a failed pod
RESTORE = ('ocibridge warm load "$@" || echo "ocibridge: warm start: nothing restored for $1; '
           'the engine compiles cold on this node" >&2')
_ITEM = re.compile(r"[-._a-zA-Z0-9]{1,253}\Z")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
_OPTION = re.compile(r"[^=\s]+=\S*\Z")


@dataclass(frozen=True)
class WarmStep:
    """What the step restores and with what: the engine's ``image``, the ``engine`` the caches
    are keyed by, the public key (``key_kind`` ``secret`` or ``configmap``, its ``key_name``
    and the ``key_item`` holding the PEM), the compile ``options`` (KEY=VALUE, as ``warm load
    --option``), the ``device`` (``cuda`` or ``cpu``), the node's ``host_path`` and whether
    the registry is reached over ``plain_http``."""

    image: str
    key_kind: str
    key_name: str
    key_item: str
    engine: str = "vllm"
    options: tuple[str, ...] = ()
    device: str = "cuda"
    host_path: str = ""
    plain_http: bool = False


def parse_key_source(text: str) -> tuple[str, str, str]:
    """``secret/NAME/ITEM`` or ``configmap/NAME/ITEM``: (kind, name, item); one error line otherwise."""
    kind, name, item = (text.split("/") + ["", ""])[:3] if text.count("/") == 2 else ("", "", "")
    if kind not in ("secret", "configmap") or not _NAME.match(name) or not _ITEM.match(item):
        raise UsageError(f"--warm-verify-key {text!r}: secret/NAME/ITEM or configmap/NAME/ITEM, the public key "
                         "(PEM) in the item ITEM of that Secret or ConfigMap")
    return kind, name, item


def check(step: WarmStep) -> None:
    if not step.image or any(c.isspace() or not c.isprintable() for c in step.image):
        raise UsageError(f"--warm-image {step.image!r} is not an image reference")
    if not step.engine or any(c.isspace() for c in step.engine):
        raise UsageError(f"--warm-engine {step.engine!r}: a name without spaces (vllm, sglang, torch, ...)")
    if step.device not in ("cuda", "cpu"):
        raise UsageError(f"--warm-device {step.device!r}: cuda or cpu")
    if not step.host_path.startswith("/") or any(c.isspace() for c in step.host_path):
        raise UsageError(f"--warm-host-path {step.host_path!r}: an absolute path on the node")
    for option in step.options:
        if not _OPTION.match(option):
            raise UsageError(f"--warm-option {option!r}: KEY=VALUE (no spaces)")
    parse_key_source(f"{step.key_kind}/{step.key_name}/{step.key_item}")


def add_warm_step(spec: dict[str, Any], step: WarmStep, refs: list[str], *, pull_secret: str | None) -> list[str]:
    """Add the step to the pod ``spec`` (one init container per model of ``refs``, each pinned
    by digest) and its volumes; the header's lines. ``pull_secret``: a dockerconfigjson Secret
    the step reads the registry's credentials from (the one the node pulls with)."""
    check(step)
    volumes: list[dict[str, Any]] = [
        {"name": "warm-cache", "hostPath": {"path": step.host_path, "type": "DirectoryOrCreate"}},
        {"name": "warm-key", step.key_kind if step.key_kind == "secret" else "configMap": {
            "secretName" if step.key_kind == "secret" else "name": step.key_name,
            "items": [{"key": step.key_item, "path": step.key_item}]}},
        {"name": "warm-tmp", "emptyDir": {"sizeLimit": "64Gi"}},
    ]
    mounts: list[dict[str, Any]] = [{"name": "warm-cache", "mountPath": CACHE_DIR},
                                    {"name": "warm-key", "mountPath": KEY_DIR, "readOnly": True},
                                    {"name": "warm-tmp", "mountPath": TMP_DIR}]
    env = [{"name": "HOME", "value": TMP_DIR}, {"name": "TMPDIR", "value": TMP_DIR}]
    if step.device == "cuda":  # the node's GPUs seen, none allocated (see the module's text)
        env += [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}]
    if pull_secret is not None:
        check_secret_name("--image-pull-secret", pull_secret)
        volume, mount, var = docker_config_mount(pull_secret)
        volumes.append(volume)
        mounts.append(mount)
        env.append(var)
    flags = ["--engine", step.engine, "--device", step.device, "--verify-key", f"{KEY_DIR}/{step.key_item}"]
    for option in step.options:
        flags += ["--option", option]
    if step.plain_http:
        flags.append("--plain-http")
    inits = spec.setdefault("initContainers", [])
    for n, ref in enumerate(refs):
        inits.append({
            "name": f"warm-{n}", "image": step.image, "command": ["sh", "-c", RESTORE, "warm-load"],
            "args": [ref, CACHE_DIR, *flags], "env": env, "volumeMounts": mounts,
            # torch is imported to compute the key: more memory than the holding container's
            "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "4Gi"}},
            # root: the hostPath directory the kubelet creates is root's
            "securityContext": {"runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}},
        })
    spec.setdefault("volumes", []).extend(volumes)
    return [f"Compile caches: each node restores the {step.engine} cache of each model for its own key "
            f"into {step.host_path} (verified with {step.key_kind} {step.key_name}'s {step.key_item}); "
            f"mount it in the engine's pod at its cache directory (vLLM: $VLLM_CACHE_ROOT/torch_compile_cache) "
            f"as a hostPath volume of that path"]


def warm_step(image: str | None, verify_key: str | None, *, engine: str = "vllm", options: tuple[str, ...] = (),
              device: str = "cuda", host_path: str | None = None, plain_http: bool = False) -> WarmStep | None:
    """The step the prewarm's options ask for (None: no ``image``, no step); one error line for
    one without its key, or key options without an image."""
    if image is None:
        if verify_key or options or host_path:
            raise UsageError("--warm-verify-key, --warm-option and --warm-host-path go with --warm-image IMAGE "
                             "(the engine's image, with ocibridge: the caches' key is read there)")
        return None
    if not verify_key:
        raise UsageError("--warm-image needs --warm-verify-key secret/NAME/ITEM (or configmap/NAME/ITEM): a "
                         "compile cache is code that runs, restored only once its signature verifies")
    kind, name, item = parse_key_source(verify_key)
    return WarmStep(image, kind, name, item, engine=engine, options=options, device=device,
                    host_path=host_path or "", plain_http=plain_http)
