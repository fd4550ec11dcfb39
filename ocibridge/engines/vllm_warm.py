"""A warm start for vLLM's loader: before the weights stream in (vLLM compiles after they are
loaded), the compile cache attached to the model for this process's key is restored into
vLLM's ``torch_compile_cache`` directory, its signature verified under the model's own keys
and policy; once vLLM has compiled, the directory can be attached to the model for the next
node, signed (:func:`save_cache`). A warm start is an optimisation: no cache for this key, a
refused signature or a changed byte is one line, nothing is restored, and vLLM compiles cold.
Needs no vLLM (its version is the caller's), so it is tested without the engine."""

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

#: what ``warm`` may say: ``load`` restores the model's compile cache before vLLM compiles,
#: ``save`` attaches vLLM's once it has compiled (when none has this key), ``load+save`` both
WARM_MODES = ("load", "save", "load+save")
#: the engine name a vLLM cache is keyed by (``ocibridge warm save ... --engine vllm``)
ENGINE = "vllm"


@dataclass(frozen=True)
class WarmSettings:
    """The warm-start part of the loader's settings: ``mode`` (None: off), the compile
    ``options`` hashed into the key, whether an unsigned cache may load, and the private key
    a saved cache is signed with (its password: ``$COSIGN_PASSWORD``)."""

    mode: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    allow_unsigned: bool = False
    key: str | None = None

    @property
    def loads(self) -> bool:
        return self.mode in ("load", "load+save")

    @property
    def saves(self) -> bool:
        return self.mode in ("save", "load+save")

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None) -> WarmSettings:
        """One error line for a value of the wrong kind (the keys were checked by
        :meth:`WeightSource.from_settings`)."""
        given = dict(settings or {})
        mode = given.get("warm")
        options = given.get("warm_options", {})
        allow = given.get("warm_allow_unsigned", False)
        key = given.get("warm_key")
        if mode is not None and mode not in WARM_MODES:
            raise OcibridgeError(f"ocibridge loader: \"warm\" is {', '.join(map(repr, WARM_MODES))}, not {mode!r}")
        if key is not None and (not isinstance(key, str) or not key):
            raise OcibridgeError(f"ocibridge loader: \"warm_key\" is a private key file's path, not {key!r}")
        if mode in ("save", "load+save") and key is None:
            raise OcibridgeError(f"ocibridge loader: \"warm\": {mode!r} signs the cache it saves: name the private "
                                 "key in \"warm_key\" (its password in $COSIGN_PASSWORD)")
        if not isinstance(options, dict):
            raise OcibridgeError(f"ocibridge loader: \"warm_options\" is a JSON object, not {options!r}")
        if not isinstance(allow, bool):
            raise OcibridgeError(f"ocibridge loader: \"warm_allow_unsigned\" is true or false, not {allow!r}")
        return cls(mode, options, allow, None if key is None else os.path.expanduser(key))


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
    if not settings.loads:
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


def save_cache(source: WeightSource, settings: WarmSettings, engine_version: str, *,
               device: str | None = None, warn: Warn = warn_stderr) -> str | None:
    """Attach :func:`vllm_cache_dir` to the model as its compile cache for this process's key,
    signed with ``settings.key``, when ``settings`` ask it and no cache of that key is attached
    yet; the saved cache's digest, else None. Call it once vLLM has compiled. Anything that
    keeps it from saving is one line through ``warn`` (the engine serves on)."""
    if not settings.saves:
        return None
    from ocibridge.api.options import SignOptions
    from ocibridge.api.warm import warm_caches, warm_key, warm_save

    cache = vllm_cache_dir()
    try:
        if not cache.is_dir() or not any(cache.iterdir()):
            warn(f"warm start: {cache} holds nothing to save (did vLLM compile? --enforce-eager compiles nothing)")
            return None
        key = warm_key(source.reference, form="dir", engine=ENGINE, engine_version=engine_version,
                       options=settings.options, device=device)
        held = [c.digest for c in warm_caches(source.reference).caches if c.key == key]
        if held:
            warn(f"warm start: the model has a compile cache for this key already ({held[0][:19]}); nothing saved")
            return None
        assert settings.key is not None  # (checked with the settings)
        saved = warm_save(source.reference, cache, key=key, sign=SignOptions(key=settings.key))
    except (OcibridgeError, OSError) as e:
        warn(f"warm start: compile cache not saved: {one_line(str(e))}")
        return None
    warn(f"warm start: compile cache {saved.digest[:19]} saved from {cache} for the next start "
         f"({saved.files} files, {saved.size} bytes, signed: {', '.join(saved.signed)})")
    return saved.digest
