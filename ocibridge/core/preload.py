"""Modules loaded in a thread while this process waits on something else.

A push sends its large files before it builds the config that names their digests: the config
model (pydantic) is needed only then, so it is loaded while the files go out instead of before
the first byte does. Python's import lock makes a later ``import`` of the same module wait for
the thread's, and a module that fails to load here fails again, with its own error, where it is
used.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading


def preload(*modules: str) -> None:
    """Start loading ``modules`` (those not loaded yet) in a daemon thread."""
    wanted = [name for name in modules if name not in sys.modules]
    if wanted:
        threading.Thread(target=_load, args=(wanted,), name="preload", daemon=True).start()


def _load(modules: list[str]) -> None:
    for name in modules:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
