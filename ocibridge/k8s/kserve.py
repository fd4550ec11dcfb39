"""The KServe ``InferenceService`` that serves a ModelCar image, pinned by digest.

``oci://`` is KServe's classic ModelCar mode: the image runs as a sidecar, so it needs a shell
(``k8s modelcar --base``). A data-only image is given as ``oci+native://`` (an image volume,
KServe 0.20 and later) instead: ``oci://`` would name an image whose sidecar cannot start.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ocibridge.errors import UsageError
from ocibridge.stores.registry.pull_secret import check_secret_name

_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?\Z")  # an InferenceService name is a DNS-1035 label


def check_name(name: str) -> None:
    if not _NAME.match(name):
        raise UsageError(f"--kserve {name!r}: an InferenceService name starts with a letter and has only "
                         "lowercase letters, digits and '-'")


def inference_service(name: str, pinned: str, *, runnable: bool, model_format: str = "huggingface",
                      pull_secrets: Sequence[str] = (), namespace: str | None = None) -> dict[str, Any]:
    """The InferenceService mapping; ``runnable``: the image has a shell (built with a base)."""
    check_name(name)
    for secret in pull_secrets:
        check_secret_name("--image-pull-secret", secret)
    scheme = "oci" if runnable else "oci+native"
    predictor: dict[str, Any] = {"model": {"modelFormat": {"name": model_format},
                                           "storageUri": f"{scheme}://{pinned}"}}
    if pull_secrets:
        predictor["imagePullSecrets"] = [{"name": s} for s in dict.fromkeys(pull_secrets)]
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": meta,
            "spec": {"predictor": predictor}}


def header(pinned: str, runnable: bool) -> str:
    """The comment lines above the YAML: which KServe mode, what it needs."""
    from ocibridge.core.yamldocs import comments

    if runnable:
        return comments([f"KServe ModelCar (sidecar) mode for {pinned}: the image has a shell; the files are at "
                         "/mnt/models", "in the predictor. Needs the storageInitializer's enableModelcar: true "
                         "(inferenceservice-config)."])
    return comments([f"KServe image-volume mode (oci+native://, KServe 0.20 and later) for {pinned}: a data-only "
                     "image", "(build with --base IMAGE for the oci:// sidecar mode). Needs ImageVolume and a "
                     "runtime with subPath."])
