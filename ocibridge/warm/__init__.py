"""Warm starts: compile caches (torch's portable cache artifacts, vLLM's ``torch_compile_cache``,
Triton's, Inductor's and SGLang's cache directories) kept beside a model as signed referrers of
its manifest, keyed by everything they are valid for, and restored on any node before the
first compile (docs/warm.md)."""

from ocibridge.warm.api import (
    CacheMismatch,
    WarmCache,
    WarmList,
    WarmLoaded,
    WarmSaved,
    caches,
    key,
    load,
    save,
)
from ocibridge.warm.artifact import ARTIFACT_TYPE
from ocibridge.warm.keys import WarmKey, current_key, options_digest

__all__ = ["ARTIFACT_TYPE", "CacheMismatch", "WarmCache", "WarmKey", "WarmList", "WarmLoaded", "WarmSaved", "caches",
           "current_key", "key", "load", "options_digest", "save"]
