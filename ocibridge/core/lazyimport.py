"""Modules and functions loaded on first use, so that ``--help`` and ``--version`` start fast.

The CLI names the API at import time; the API pulls in pydantic and httpx (~0.15 s). A
:class:`LazyModule` stands for a module until an attribute is read from it, and
:func:`lazy_function` for a function until it is called.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any


class LazyModule:
    """``name``, imported when an attribute of it is first read."""

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attribute)


def lazy_function(module: str, name: str) -> Callable[..., Any]:
    """A function that imports ``module`` and calls its ``name`` on first call."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call
