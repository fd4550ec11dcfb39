"""The ``mirrors`` of registries.toml carried to the nodes, so a fleet pulls through one mirror.

ocibridge's own reads (``path``, ``pull``) ask a registry's mirrors first (stores/registry/
mirrors.py). A node pulls with its runtime, which reads its own settings: CRI-O the
containers-registries.conf files (a drop-in in ``/etc/containers/registries.conf.d``, a
``[[registry.mirror]]`` per mirror, in order, before the registry itself), containerd a
``hosts.toml`` per registry under ``/etc/containerd/certs.d/HOST`` (a ``[host."URL"]`` per
mirror, in order, with ``capabilities = ["pull", "resolve"]``, then ``server``). This module
writes those files from the same settings, and the two documents that put them on every node:
a ConfigMap holding them and a DaemonSet whose one container copies them into the runtime's
directory (a ``hostPath``, the only place of the node it can write) and stays, so
``kubectl rollout status`` says when every node has them. A mirror's name is checked when
registries.toml is read (``host[:port][/path]``): it is written into TOML and into paths here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ocibridge.core.hosts import is_loopback
from ocibridge.k8s.runtime import Runtime, RuntimeVersion
from ocibridge.stores.registry.hostsettings import host_settings

CRIO_DIR = "/etc/containers/registries.conf.d"
CONTAINERD_DIR = "/etc/containerd/certs.d"
#: Docker Hub's name in references, and the host its API answers on (containerd's ``server``)
DOCKER_HUB, DOCKER_HUB_API = "docker.io", "registry-1.docker.io"
#: what the installer runs: each argument a file under /src copied to the same path under
#: /host, through a temporary name (a runtime never reads half a file); then it stays
INSTALL = ('for f in "$@"; do mkdir -p "/host/$(dirname "$f")" && cp "/src/$f" "/host/$f.new" '
           '&& mv "/host/$f.new" "/host/$f" || exit 1; done; exec sleep infinity')


@dataclass(frozen=True)
class Mirror:
    """One mirror of a registry, as the node reaches it."""

    location: str  # host[:port][/path], as registries.toml writes it
    plain_http: bool
    insecure: bool

    @property
    def host(self) -> str:
        return self.location.partition("/")[0]

    @property
    def path(self) -> str:
        return self.location.partition("/")[2].strip("/")


@dataclass(frozen=True)
class RegistryMirrors:
    """A registry the nodes pull from, and its mirrors in the order they are asked."""

    registry: str
    plain_http: bool
    insecure: bool
    mirrors: tuple[Mirror, ...]


def mirrors_of(registries: Iterable[str]) -> list[RegistryMirrors]:
    """The registries among ``registries`` that registries.toml gives mirrors, with them."""
    found = []
    for registry in sorted(set(registries)):
        listed = host_settings(registry).mirrors
        if not listed:
            continue
        mirrors = tuple(_mirror(m) for m in listed)
        plain, insecure = _reached(registry)
        found.append(RegistryMirrors(registry, plain, insecure, mirrors))
    return found


def _mirror(location: str) -> Mirror:
    """A mirror as registries.toml names it (its grammar checked there: stores/registry/hostsettings.py)."""
    plain, insecure = _reached(location.strip("/").partition("/")[0])
    return Mirror(location.strip("/"), plain, insecure)


def _reached(host: str) -> tuple[bool, bool]:
    """(plain HTTP, TLS unverified) for ``host``, as ocibridge reaches it (a loopback name is
    plain HTTP unless its settings say otherwise)."""
    said = host_settings(host)
    plain = said.plain_http if said.plain_http is not None else (is_loopback(host) and not said.ca_file)
    return bool(plain), bool(said.insecure)


def _q(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for what a checked name can hold)."""
    return json.dumps(text)


def crio_dropin(found: Iterable[RegistryMirrors]) -> str:
    """A containers-registries.conf drop-in: each registry with its mirrors, in order."""
    out = ["# written by ocibridge k8s prewarm from registries.toml: pulls ask these mirrors first\n"]
    for r in found:
        out.append(f"\n[[registry]]\nprefix = {_q(r.registry)}\nlocation = {_q(r.registry)}\n")
        if r.plain_http or r.insecure:
            out.append("insecure = true\n")
        for m in r.mirrors:
            out.append(f"\n[[registry.mirror]]\nlocation = {_q(m.location)}\n")
            if m.plain_http or m.insecure:
                out.append("insecure = true\n")
    return "".join(out)


def containerd_hosts(r: RegistryMirrors) -> str:
    """containerd's ``certs.d/HOST/hosts.toml`` of one registry: its mirrors, then itself."""
    server = DOCKER_HUB_API if r.registry == DOCKER_HUB else r.registry
    out = [f"server = {_q(('http' if r.plain_http else 'https') + '://' + server)}\n"]
    for m in r.mirrors:
        url = f"{'http' if m.plain_http else 'https'}://{m.host}" + (f"/v2/{m.path}" if m.path else "")
        out.append(f"\n[host.{_q(url)}]\n  capabilities = [\"pull\", \"resolve\"]\n")
        if m.path:  # containerd appends /v2 itself unless told the path is whole
            out.append("  override_path = true\n")
        if m.insecure:
            out.append("  skip_verify = true\n")
    return "".join(out)


def node_files(found: list[RegistryMirrors], runtime: RuntimeVersion, name: str) -> tuple[str, dict[str, str]]:
    """(the runtime's directory, {path under it: content}) of the node's mirror settings."""
    if runtime.runtime is Runtime.CRIO:
        return CRIO_DIR, {f"50-{name}.conf": crio_dropin(found)}
    return CONTAINERD_DIR, {f"{r.registry}/hosts.toml": containerd_hosts(r) for r in found}


def installer(found: list[RegistryMirrors], runtime: RuntimeVersion, *, name: str, namespace: str | None,
              image: str, labels: dict[str, str], selector: dict[str, str] | None) -> list[dict[str, Any]]:
    """The ConfigMap holding the node files and the DaemonSet copying them onto each node."""
    directory, files = node_files(found, runtime, name)
    keys = {path: f"file-{n}" for n, path in enumerate(sorted(files))}  # a ConfigMap key holds no '/' nor ':'
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                 "data": {keys[path]: files[path] for path in sorted(files)}}
    container = {
        "name": "install", "image": image, "command": ["sh", "-c", INSTALL, "install", *sorted(files)],
        "volumeMounts": [{"name": "files", "mountPath": "/src", "readOnly": True},
                         {"name": "node", "mountPath": "/host"}],
        "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {"memory": "16Mi"}},
        # root writes the runtime's root-owned directory; nothing else of the node is mounted
        "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
    }
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1, "containers": [container],
        "volumes": [{"name": "files", "configMap": {"name": name, "items": [{"key": keys[p], "path": p}
                                                                            for p in sorted(files)]}},
                    {"name": "node", "hostPath": {"path": directory, "type": "DirectoryOrCreate"}}],
    }
    if selector:
        spec["nodeSelector"] = dict(selector)
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta,
                 "spec": {"selector": {"matchLabels": labels},
                          "template": {"metadata": {"labels": labels}, "spec": spec}}}
    return [configmap, daemonset]


def notes(found: list[RegistryMirrors], runtime: RuntimeVersion, name: str) -> list[str]:
    """What the header says: who pulls through what, and what the node must do."""
    directory, _ = node_files(found, runtime, name)
    lines = [f"Nodes pull {r.registry} through {', '.join(m.location for m in r.mirrors)} first "
             f"(registries.toml mirrors): ds/{name} writes {directory} on each node" for r in found]
    if runtime.runtime is Runtime.CRIO:
        lines.append("CRI-O reads registries.conf.d again on `systemctl reload crio` (SIGHUP): reload it once "
                     f"ds/{name} is ready, before the models are pulled")
    else:
        lines.append(f"containerd reads {CONTAINERD_DIR} at each pull when its CRI plugin has config_path "
                     f"= \"{CONTAINERD_DIR}\" (2.x's default; set it on 1.x)")
    return lines


def not_carried(registries: Iterable[str]) -> list[str]:
    """Warnings for an output that pulls on the nodes but installs nothing there (a Pod, an
    InferenceService): the registries.toml mirrors are this machine's until prewarm carries them."""
    return [f"warning: registries.toml sends reads of {r.registry} through "
            f"{', '.join(m.location for m in r.mirrors)}, but the nodes pull with their runtime's settings: "
            "`ocibridge k8s prewarm REF` prints the DaemonSet that gives them these mirrors "
            "(docs/kubernetes.md, 'A fleet behind one mirror')" for r in mirrors_of(registries)]


def settings_toml(found: Iterable[RegistryMirrors]) -> str:
    """registries.toml for a pod that runs ocibridge (``k8s serve``): each registry's mirrors,
    and how each mirror is reached, as this machine's settings say."""
    out = ["# ocibridge's registries.toml (written by k8s serve): reads ask these mirrors first\n"]
    reached: dict[str, Mirror] = {}
    for r in found:
        out.append(f"\n[registry.{_q(r.registry)}]\nmirrors = [{', '.join(_q(m.location) for m in r.mirrors)}]\n")
        reached.update((m.host, m) for m in r.mirrors)
    for host, m in sorted(reached.items()):
        if m.plain_http or m.insecure:
            out.append(f"\n[registry.{_q(host)}]\nplain_http = {str(m.plain_http).lower()}\n"
                       f"insecure = {str(m.insecure).lower()}\n")
    return "".join(out)
