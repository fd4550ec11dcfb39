"""The compile caches attached to a model (ocibridge/warm/: referrers of the model manifest of
type ``application/vnd.ocibridge.warm.v1+json``), as its page lists them: what each is keyed by,
its size, and whether a signature is attached to it (listed, not verified: a node's ``warm load``
verifies under its own policy before it restores anything)."""

from __future__ import annotations

from dataclasses import dataclass

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.web import facts
from ocibridge.hubserver.web.render import human_size
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import Store
from ocibridge.warm.artifact import CacheArtifact, attached_caches
from ocibridge.warm.cachekey import NONE


@dataclass(frozen=True)
class WarmRow:
    """One cache as the page's table prints it."""

    digest: str
    engine: str  # the engine and its version: vllm 0.33.1
    form: str
    torch: str
    gpu_stack: str  # triton, CUDA or ROCm: what is not ``none``
    device: str  # the architecture, and the driver where one is keyed
    python: str
    options: str  # the compile options' digest, shortened
    size: str
    signed: str  # the signature forms attached (classic, bundle), "" for none


def warm_rows(store: Store, model: Descriptor) -> tuple[WarmRow, ...]:
    """The caches attached to ``model`` in ``store``; none when the registry cannot list them."""
    try:
        return tuple(_row(store, cache) for cache in attached_caches(store, model))
    except OcibridgeError:
        return ()


def _row(store: Store, cache: CacheArtifact) -> WarmRow:
    key = cache.key
    stack = ", ".join(f"{name} {value}" for name, value in (("triton", key.triton), ("CUDA", key.cuda),
                                                            ("ROCm", key.rocm)) if value != NONE)
    device = key.device + (f" (driver {key.driver})" if key.driver != NONE else "")
    return WarmRow(cache.desc.digest, f"{key.engine} {key.engine_version}", key.form, key.torch, stack or "—",
                   device, key.python, key.options[:19], human_size(cache.layer.size), _signed(store, cache.desc))


def _signed(store: Store, desc: Descriptor) -> str:
    forms = ["classic"] if facts.classic_signature(store, desc) is not None else []
    try:
        referrers = store.referrers(desc)
    except OcibridgeError:
        referrers = []
    if any(e.kind == "signature" for e in facts.classify(referrers)):
        forms.append("bundle")
    return ", ".join(forms)
