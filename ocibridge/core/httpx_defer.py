"""httpx's command-line tool and trio, kept out of the start of a program that imports ocibridge
and of the ``ocibridge`` command: one finder, on ``sys.meta_path`` only until httpx and httpcore
are loaded.

httpx's ``__init__`` imports its command-line tool (click, rich, pygments) wherever those are
installed, and httpcore imports trio wherever it is installed (to tell trio from asyncio when an
async call comes); a program loading a model uses neither, nor does the command, and they were
the largest share of the imports before the first request, and of the objects the exit tears
down. While httpx or httpcore runs its own ``__init__`` (and only then), the finder puts off
each name of :data:`DEFERRED` as that table says:

- refused: httpx then takes its fallback ``main``, replaced by :func:`httpx_cli`, which imports
  the real tool when called; httpcore takes asyncio alone. Nothing is left in ``sys.modules``,
  so a later ``import httpx._main`` or ``import trio`` loads the real module;
- loaded when used: ``import trio`` returns a module whose code runs at the first use of one of
  its names (by httpcore under trio, or by the program); not ``importlib.util.LazyLoader``'s,
  which a second ``import trio`` (httpcore has two) loads at once by reading its ``__spec__``.

``import ocibridge`` puts the finder there for a program; the command's entry point, run before
httpx is imported, switches it to the command's column (the command never runs under trio, and
an unrun module in ``sys.modules`` still runs for anything that reads its names). The finder is
not put there when httpx already was loaded.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import threading
import types
from collections.abc import Sequence
from importlib.machinery import SourceFileLoader, SourcelessFileLoader
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (for mypy only: nothing made at import)
    from typing import Literal

    Deferral = Literal["refused", "loaded when used"]

#: what httpx and httpcore import as they load that neither needs, and how each is put off:
#: (in a program that imports ocibridge, in the ``ocibridge`` command)
DEFERRED: dict[str, tuple[Deferral, Deferral]] = {
    "httpx._main": ("refused", "refused"),  # httpx's command-line tool: click, rich, pygments
    "trio": ("loaded when used", "refused"),  # httpcore's test for trio (which brings subprocess, ctypes)
}
#: the packages whose own imports are deferred while they load
WATCHED = ("httpx", "httpcore")
#: the loaders wrapped (a package's files, compiled or not); any other is left as it is
FILE_LOADERS = (SourceFileLoader, SourcelessFileLoader)
CLI = "httpx._main"


def httpx_cli(*args: Any, **kwargs: Any) -> Any:
    """httpx's command-line tool (``httpx.main``), imported at its first call."""
    from httpx._main import main

    return main(*args, **kwargs)


class _LoadedOnUse(types.ModuleType):
    """A module not run yet: the first name read or set on it runs its code (its ``__spec__``
    excepted: the import system reads that to see whether it is loaded)."""

    def __getattribute__(self, name: str) -> Any:
        if name == "__spec__":
            return super().__getattribute__(name)
        _run(self)
        return getattr(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        _run(self)
        setattr(self, name, value)

    def __delattr__(self, name: str) -> None:
        _run(self)
        delattr(self, name)


_RUNNING = threading.Lock()
_COUNTING = threading.Lock()


def _run(module: types.ModuleType) -> None:
    """Run a module left for later, once: it is a plain module from then on (a thread that
    reads it while its code runs sees it half made, as any module being imported)."""
    with _RUNNING:
        if type(module) is not _LoadedOnUse:
            return
        spec = types.ModuleType.__getattribute__(module, "__spec__")
        later = types.ModuleType.__getattribute__(module, "__loader__")
        types.ModuleType.__setattr__(module, "__class__", types.ModuleType)
    spec.loader = module.__loader__ = later.loader
    try:
        later.loader.exec_module(module)
    except BaseException:  # (left for later again: the next use runs it again and raises as a failed import does)
        types.ModuleType.__setattr__(module, "__loader__", later)
        types.ModuleType.__setattr__(module, "__class__", _LoadedOnUse)
        raise


class _OnUse:
    """The loader of a module whose code runs at its first use (:class:`_LoadedOnUse`)."""

    def __init__(self, loader: SourceFileLoader | SourcelessFileLoader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        made: types.ModuleType | None = self.loader.create_module(spec)  # (None: the usual module)
        return made

    def exec_module(self, module: types.ModuleType) -> None:
        module.__class__ = _LoadedOnUse


class _ThisThread(threading.local):
    """Per thread: how deep in httpx's or httpcore's own loading it is, and whether it is
    asking the other finders (so that this one stays out of that search)."""

    def __init__(self) -> None:
        self.loading = 0
        self.searching = False


class _ThenDefer:
    """The watched package's own loader, with this finder's window open while it runs."""

    def __init__(self, loader: SourceFileLoader | SourcelessFileLoader, finder: DeferHttpxExtras) -> None:
        self.loader = loader
        self.finder = finder

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        self.finder.begun()  # (before the module is put in sys.modules, where another thread may see it)
        made: types.ModuleType | None = self.loader.create_module(spec)  # (None: the usual module)
        return made

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__spec__ is not None:  # (the module keeps its real loader, as if never wrapped)
            module.__spec__.loader = self.loader
        module.__loader__ = self.loader
        self.finder.here.loading += 1
        try:
            self.loader.exec_module(module)
        finally:
            self.finder.closed()
        if module.__name__ == "httpx" and self.finder.cli_refused:
            module.main = httpx_cli  # type: ignore[attr-defined]
        self.finder.leave_when_done()


class DeferHttpxExtras:
    """The meta-path finder, by its ``find_spec`` (``importlib.abc``'s base class is a slow import);
    ``for_command`` picks the command's column of :data:`DEFERRED`."""

    def __init__(self, for_command: bool = False) -> None:
        self.here = _ThisThread()
        self.cli_refused = False
        self.for_command = for_command
        self.loads = 0  # watched packages made and not yet run, or running, in any thread (under _COUNTING)

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if self.here.searching:
            return None
        if name in WATCHED:
            return self._wrapped(name)
        if not self.here.loading or name not in DEFERRED:
            return None
        if DEFERRED[name][1 if self.for_command else 0] == "loaded when used":
            return self._lazy(name)
        if name == CLI:
            self.cli_refused = True
        raise ModuleNotFoundError(f"{name} is put off while httpx and httpcore load (ocibridge.core.httpx_defer)",
                                  name=name)

    def _elsewhere(self, name: str) -> importlib.machinery.ModuleSpec | None:
        """The spec the other finders give ``name``."""
        self.here.searching = True
        try:
            return importlib.util.find_spec(name)
        finally:
            self.here.searching = False

    def _wrapped(self, name: str) -> importlib.machinery.ModuleSpec | None:
        spec = self._elsewhere(name)
        if spec is not None and isinstance(spec.loader, FILE_LOADERS):
            spec.loader = _ThenDefer(spec.loader, self)  # type: ignore[assignment]
        return spec

    def _lazy(self, name: str) -> importlib.machinery.ModuleSpec | None:
        spec = self._elsewhere(name)
        if spec is not None and isinstance(spec.loader, FILE_LOADERS):
            spec.loader = _OnUse(spec.loader)  # type: ignore[assignment]
        return spec

    def begun(self) -> None:
        with _COUNTING:
            self.loads += 1

    def closed(self) -> None:
        self.here.loading -= 1
        with _COUNTING:
            self.loads -= 1

    def leave_when_done(self) -> None:
        """Leave once both packages are loaded and neither is still being loaded by another
        thread (whose ``__init__`` would import its extras with this finder gone)."""
        with _COUNTING:
            if not self.loads and all(name in sys.modules for name in WATCHED) and self in sys.meta_path:
                sys.meta_path.remove(self)


def defer_httpx_extras(for_command: bool = False) -> None:
    """Put the finder first on ``sys.meta_path`` (``for_command``: the ``ocibridge`` command's entry
    point, which also switches a finder ``import ocibridge`` put there), unless httpx is loaded
    already (a no-op then)."""
    if "httpx" in sys.modules:
        return
    finder = next((found for found in sys.meta_path if isinstance(found, DeferHttpxExtras)), None)
    if finder is None:
        sys.meta_path.insert(0, DeferHttpxExtras(for_command))
    elif for_command:
        finder.for_command = True
