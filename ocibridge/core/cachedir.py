"""The user cache directory of ocibridge: the pull cache and the model cache live under it."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "OCIBRIDGE_CACHE_DIR"


def user_cache_dir() -> Path:
    """``$OCIBRIDGE_CACHE_DIR``, else ``$XDG_CACHE_HOME/ocibridge``, else ``~/.cache/ocibridge``."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ocibridge"
