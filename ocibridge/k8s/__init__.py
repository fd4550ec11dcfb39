"""Kubernetes image volumes: what CRI-O and containerd will mount, ModelCar images, Pod YAML."""

from ocibridge.k8s.check import CheckResult, check
from ocibridge.k8s.mount import MountResult, mount
from ocibridge.k8s.runtime import Runtime, RuntimeVersion
from ocibridge.k8s.volume import pinned_reference, pod_document, pod_yaml, volume_document, volume_yaml
from ocibridge.kinds.modelcar.build import build_modelcar
from ocibridge.layers.apply import TreeEntry

__all__ = [
    "CheckResult",
    "MountResult",
    "Runtime",
    "RuntimeVersion",
    "TreeEntry",
    "build_modelcar",
    "check",
    "mount",
    "pinned_reference",
    "pod_document",
    "pod_yaml",
    "volume_document",
    "volume_yaml",
]
