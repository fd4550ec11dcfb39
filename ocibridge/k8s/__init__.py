"""Kubernetes image volumes: what CRI-O and containerd will mount, ModelCar images, Pod YAML."""

from .check import CheckResult, check
from .layers import TreeEntry
from .modelcar import build_modelcar
from .mount import mount
from .runtime import Runtime
from .volume import pinned_reference, pod_yaml, volume_yaml

__all__ = [
    "CheckResult",
    "Runtime",
    "TreeEntry",
    "build_modelcar",
    "check",
    "mount",
    "pinned_reference",
    "pod_yaml",
    "volume_yaml",
]
