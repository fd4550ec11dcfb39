"""Kubernetes image volumes: what CRI-O and containerd will mount, ModelCar images, Pod YAML."""

from .check import CheckResult, check
from .layers import TreeEntry
from .modelcar import build_modelcar
from .mount import MountResult, mount
from .runtime import Runtime, RuntimeVersion
from .volume import pinned_reference, pod_document, pod_yaml, volume_document, volume_yaml

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
