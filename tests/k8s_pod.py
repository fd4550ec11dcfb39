"""A strict check of the Pod shape `k8s volume` emits, written from the Kubernetes core/v1 API
(Pod, Container, VolumeMount, Volume, ImageVolumeSource) and its name rules. No cluster and no
schema download: unknown keys, wrong types, dangling mounts and bad names all fail."""

from __future__ import annotations

import re

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
PINNED = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+@sha256:[0-9a-f]{64}$")
PULL_POLICIES = {"Always", "IfNotPresent", "Never"}
VOLUME_MOUNT_KEYS = {"name", "mountPath", "readOnly", "subPath", "subPathExpr", "mountPropagation",
                     "recursiveReadOnly"}


def _keys(obj: dict, allowed: set[str], required: set[str], where: str) -> None:
    assert isinstance(obj, dict), f"{where}: not a mapping"
    assert not set(obj) - allowed, f"{where}: unknown keys {set(obj) - allowed}"
    assert required <= set(obj), f"{where}: missing {required - set(obj)}"


def assert_valid_volume(volume: dict) -> str:
    """One image volume; returns its pinned reference."""
    _keys(volume, {"name", "image"}, {"name", "image"}, "volume")
    assert DNS_LABEL.match(volume["name"]), volume["name"]
    image = volume["image"]
    _keys(image, {"reference", "pullPolicy"}, {"reference"}, "volume.image")
    assert image.get("pullPolicy", "IfNotPresent") in PULL_POLICIES
    assert isinstance(image["reference"], str) and PINNED.match(image["reference"]), image["reference"]
    return image["reference"]


def assert_valid_mount(mount: dict, volume_names: set[str]) -> None:
    _keys(mount, VOLUME_MOUNT_KEYS, {"name", "mountPath"}, "volumeMount")
    assert mount["name"] in volume_names, f"volumeMount names no volume: {mount['name']}"
    assert isinstance(mount["mountPath"], str) and mount["mountPath"].startswith("/")
    assert mount.get("readOnly", False) is True  # image volumes are read-only
    sub = mount.get("subPath")
    assert sub is None or (isinstance(sub, str) and not sub.startswith("/") and ".." not in sub.split("/"))


def assert_valid_pod(doc: dict) -> list[str]:
    """A v1 Pod with image volumes; returns their pinned references."""
    _keys(doc, {"apiVersion", "kind", "metadata", "spec"}, {"apiVersion", "kind", "metadata", "spec"}, "pod")
    assert doc["apiVersion"] == "v1" and doc["kind"] == "Pod"
    _keys(doc["metadata"], {"name", "namespace", "labels", "annotations"}, {"name"}, "metadata")
    assert DNS_SUBDOMAIN.match(doc["metadata"]["name"])
    spec = doc["spec"]
    _keys(spec, {"containers", "volumes"}, {"containers"}, "spec")
    volumes = spec.get("volumes", [])
    refs = [assert_valid_volume(v) for v in volumes]
    names = [v["name"] for v in volumes]
    assert len(names) == len(set(names)), "duplicate volume names"
    assert spec["containers"], "a Pod needs a container"
    for c in spec["containers"]:
        _keys(c, {"name", "image", "command", "args", "volumeMounts"}, {"name", "image"}, "container")
        assert DNS_LABEL.match(c["name"]) and isinstance(c["image"], str) and c["image"]
        assert all(isinstance(a, str) for a in c.get("command", []))
        for m in c.get("volumeMounts", []):
            assert_valid_mount(m, set(names))
    return refs
