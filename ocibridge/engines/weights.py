"""A registry model's weights as an inference engine takes them: ``(name, torch.Tensor)`` pairs,
each handed over only once every chunk of it matched the chunk table (``iter_tensors``), nothing
written to disk; when several processes of a node load the model (tensor-parallel ranks, each
reading every weight), through the node's model cache instead, so the registry sends it once.
The shape of vLLM's ``model.load_weights(weights)``; this module needs only torch (no vLLM), so
the part that reads and verifies is tested without the engine.

Also the settings a loader is given (vLLM's ``--model-loader-extra-config``), read once, with
one error line for anything it does not know."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ocibridge.api.load_ops import WORKING_SET, iter_tensors
from ocibridge.api.options import TransferOptions
from ocibridge.api.policy import Verification, verification
from ocibridge.core import environment
from ocibridge.errors import OcibridgeError
from ocibridge.lazyread.model import Warn, warn_stderr

#: what a loader's extra config may say, and what each is
SETTINGS = {
    "reference": "the model's registry reference (REGISTRY/REPO:TAG or @sha256:...)",
    "verify_keys": "public key file(s): only a model signed by one of them (as --verify-key)",
    "policy": f"a containers policy file (as --policy; default: ${environment.POLICY}, the user's, the system's)",
    "device": "where the tensors are made ('cuda:0': copied there as each completes; default: host memory)",
    "max_bytes": "bytes of tensors held that were not yet handed over (default 256 MiB)",
    "through_cache": "true: the weights are fetched once into the node's model cache and every process of the "
                     "engine reads them there; false: each streams them from the registry (default: true when "
                     "more than one process loads the model, as tensor-parallel ranks do)",
    "warm": "'load': the model's compile cache for this process's key is restored into vLLM's "
            "torch_compile_cache before it compiles, verified as the model is; 'save': once vLLM has compiled, "
            "its torch_compile_cache is attached to the model for this key, signed with warm_key (unless one "
            "is attached already); 'load+save': both (docs/warm.md)",
    "warm_options": "the compile options the cache was saved with (warm save --option), hashed into its key",
    "warm_allow_unsigned": "true: a cache that nothing here asks a signature of loads unchecked",
    "warm_key": "the private key file a saved cache is signed with (its password: $COSIGN_PASSWORD)",
}


@dataclass(frozen=True)
class WeightSource:
    """Where a loader's weights come from and what they must pass: a registry reference, the
    ``verify=`` of the calls that use a model, and where the tensors are made."""

    reference: str
    verify: Verification | None = None
    device: str | None = None
    max_bytes: int | None = WORKING_SET
    through_cache: bool | None = None  # None: when more than one process loads the model

    def shared(self, ranks: int) -> bool:
        """Whether the weights go through the node's model cache, ``ranks`` processes loading them."""
        return self.through_cache if self.through_cache is not None else ranks > 1

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None) -> WeightSource:
        """The source an engine's loader settings name (vLLM: ``model_loader_extra_config``);
        one error line for a missing reference, an unknown key or a value of the wrong kind."""
        given = dict(settings or {})
        unknown = sorted(set(given) - set(SETTINGS))
        if unknown:
            raise OcibridgeError(f"ocibridge loader: unknown setting(s) {', '.join(map(repr, unknown))}; "
                                 f"known: {', '.join(SETTINGS)}")
        reference = given.get("reference")
        if not isinstance(reference, str) or not reference:
            raise OcibridgeError('ocibridge loader: no "reference" (the model\'s registry reference) in its settings, '
                                 'e.g. --model-loader-extra-config \'{"reference": "registry.example/team/model:v1"}\'')
        keys = given.get("verify_keys", ())
        keys = (keys,) if isinstance(keys, str) else keys
        policy = given.get("policy")
        device = given.get("device")
        max_bytes = given.get("max_bytes", WORKING_SET)
        if not isinstance(keys, (list, tuple)) or not all(isinstance(k, str) for k in keys):
            raise OcibridgeError("ocibridge loader: \"verify_keys\" is a key file's path or a list of them")
        for name, value in (("policy", policy), ("device", device)):
            if value is not None and not isinstance(value, str):
                raise OcibridgeError(f"ocibridge loader: {name!r} is a string, not {value!r}")
        if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1):
            raise OcibridgeError(f"ocibridge loader: \"max_bytes\" is a positive number of bytes, not {max_bytes!r}")
        through_cache = given.get("through_cache")
        if through_cache is not None and not isinstance(through_cache, bool):
            raise OcibridgeError(f"ocibridge loader: \"through_cache\" is true or false, not {through_cache!r}")
        verify = verification(keys=tuple(os.path.expanduser(k) for k in keys),
                              policy=os.path.expanduser(policy) if policy is not None else None)
        return cls(reference, verify, device, max_bytes, through_cache)


def weights(source: WeightSource | str, *, transfer: TransferOptions | None = None,
            warn: Warn | None = warn_stderr, ranks: int = 1) -> Iterator[tuple[str, Any]]:
    """``(name, torch.Tensor)`` for every tensor of the model's safetensors files (those its
    shard index names, else every one), each yielded once all its bytes matched the chunk table;
    a wrong byte raises :class:`~ocibridge.lazyread.tensorload.TensorMismatch` before any tensor
    it touches is yielded, and a model ``verify=`` or the policy file refuses raises before a
    byte of it is read. Closing the iterator (or an engine that stops early) ends the requests.
    ``ranks``: how many processes of the node load the model, each calling this (an engine's
    tensor-parallel ranks); more than one, and the source does not say otherwise, and the
    blobs are fetched once into the node's model cache, by whichever process comes first, and
    every process reads them there (``iter_tensors(through_cache=True)``)."""
    source = WeightSource(source) if isinstance(source, str) else source
    with iter_tensors(source.reference, framework="torch", device=source.device, max_bytes=source.max_bytes,
                      transfer=transfer, verify=source.verify, warn=warn,
                      through_cache=source.shared(ranks)) as stream:
        yield from stream


def load_into(model: Any, source: WeightSource | str, *, strict: bool = True,
              transfer: TransferOptions | None = None, warn: Warn | None = warn_stderr,
              ranks: int = 1) -> set[str] | None:
    """Feed :func:`weights` to ``model.load_weights`` (vLLM's model classes, or any module with
    that method) and return the names it says it loaded. When it says (vLLM's models return a
    set) and ``strict`` (vLLM: an unquantized model), every parameter of the model must be among
    them, as vLLM's own loader requires: a checkpoint that leaves one unset raises instead of
    serving from uninitialised memory. ``ranks``: as :func:`weights`'."""
    loaded = model.load_weights(weights(source, transfer=transfer, warn=warn, ranks=ranks))
    if loaded is None:
        return None
    missing = sorted({name for name, _ in model.named_parameters()} - set(loaded))
    if missing and strict:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        reference = source if isinstance(source, str) else source.reference
        raise OcibridgeError(f"{reference}: the model's weights leave {len(missing)} parameter(s) unset: {shown}")
    return set(loaded)
