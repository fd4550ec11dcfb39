"""Keep httpx's command-line tool out of ocibridge's start-up.

httpx's package ``__init__`` imports ``httpx._main`` (its CLI: rich, click and pygments) whenever
those are installed, ~30 ms of every registry command that ocibridge never uses. Before httpx
is first imported, a placeholder takes that module's name; its ``main`` loads the real module,
so ``httpx.main()`` still works. Nothing is done when httpx is already imported. Done on
import: the package imports this module before anything that imports httpx.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

_NAME = "httpx._main"


def _main(*args: Any, **kwargs: Any) -> Any:
    if isinstance(sys.modules.get(_NAME), _Placeholder):
        del sys.modules[_NAME]
    return importlib.import_module(_NAME).main(*args, **kwargs)


class _Placeholder(types.ModuleType):
    """Stands for ``httpx._main`` until its ``main`` is called."""


def defer() -> None:
    if "httpx" in sys.modules or _NAME in sys.modules:
        return
    placeholder = _Placeholder(_NAME, __doc__)
    placeholder.main = _main  # type: ignore[attr-defined]  # a module's attribute, set as httpx expects it
    sys.modules[_NAME] = placeholder


defer()
