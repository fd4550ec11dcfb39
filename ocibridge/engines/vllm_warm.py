"""A warm start for vLLM's loader: before the weights stream in (vLLM compiles after they are
loaded), the compile cache attached to the model for this process's key is restored into
vLLM's ``torch_compile_cache`` directory, its signature verified under the model's own keys
and policy. A warm start is an optimisation: no cache for this key, a refused signature or a
changed byte is one line, nothing is restored, and vLLM compiles cold. Needs no vLLM (its
version is the caller's), so it is tested without the engine."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocibridge.api.warm import warm_load
from ocibridge.core.terminal import one_line
from ocibridge.engines.weights import WeightSource
from ocibridge.errors import OcibridgeError
from ocibridge.lazyread.model import Warn, warn_stderr

#: what ``warm`` may say: ``load`` restores the model's compile cache before vLLM compiles
WARM_MODES = ("load",)
#: the engine name a vLLM cache is keyed by (``ocibridge warm save ... --engine vllm``)
ENGINE = "vllm"


@dataclass(frozen=True)
class WarmSettings:
    """The warm-start part of the loader's settings: ``mode`` (None: off), the compile
    ``options`` hashed into the key, and whether an unsigned cache may load."""

    mode: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    allow_unsigned: bool = False

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None) -> WarmSettings:
        """One error line for a value of the wrong kind (the keys were checked by
        :meth:`WeightSource.from_settings`)."""
        given = dict(settings or {})
        mode = given.get("warm")
        options = given.get("warm_options", {})
        allow = given.get("warm_allow_unsigned", False)
        if mode is not None and mode not in WARM_MODES:
            raise OcibridgeError(f"ocibridge loader: \"warm\" is {' or '.join(map(repr, WARM_MODES))}, not {mode!r}")
        if not isinstance(options, dict):
            raise OcibridgeError(f"ocibridge loader: \"warm_options\" is a JSON object, not {options!r}")
        if not isinstance(allow, bool):
            raise OcibridgeError(f"ocibridge loader: \"warm_allow_unsigned\" is true or false, not {allow!r}")
        return cls(mode, options, allow)


def vllm_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """vLLM's compile cache directory, as vLLM names it: ``$VLLM_CACHE_ROOT`` (default
    ``$XDG_CACHE_HOME/vllm``, else ``~/.cache/vllm``), its ``torch_compile_cache``."""
    env = os.environ if environ is None else environ
    root = env.get("VLLM_CACHE_ROOT") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "vllm")
    return Path(os.path.expanduser(root)) / "torch_compile_cache"


def this_device() -> str | None:
    """The CUDA device this process uses (vLLM sets each rank's), None without one (the key's default)."""
    import torch

    return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else None


def restore_cache(source: WeightSource, settings: WarmSettings, engine_version: str, *,
                  device: str | None = None, warn: Warn = warn_stderr) -> bool:
    """Restore the model's vLLM compile cache for this process's key into :func:`vllm_cache_dir`
    when ``settings`` ask it; whether one was. Anything that keeps it from loading is one line
    through ``warn`` and nothing restored (the engine compiles cold)."""
    if settings.mode != "load":
        return False
    dest = vllm_cache_dir()
    try:
        done = warm_load(source.reference, dest, engine=ENGINE, engine_version=engine_version,
                         options=settings.options, device=device, verify=source.verify,
                         allow_unsigned=settings.allow_unsigned)
    except (OcibridgeError, OSError) as e:
        warn(f"warm start: {one_line(str(e))}; vLLM compiles cold")
        return False
    checked = "signature verified" if done.checked else "unsigned, loaded as asked"
    warn(f"warm start: compile cache {done.digest[:19]} restored into {dest} "
         f"({done.files} files, {done.bytes} bytes, {checked})")
    return True
