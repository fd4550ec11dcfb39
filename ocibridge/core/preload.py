"""Modules loaded in a thread while this process waits on something else.

A push sends its large files before it builds the config that names their digests: the config
model (pydantic) is needed only then, so it is loaded while the files go out instead of before
the first byte does. It starts at the first read of such a file (:class:`LoadsOnFirstRead`):
an import holds the interpreter, and started before the requests that precede the first byte
(the tag's HEAD, the session's POST) it delays each of their answers; started with the body it
overlaps a send that waits on the socket. Python's import lock makes a later ``import`` of the
same module wait for the thread's, and a module that fails to load here fails again, with its
own error, where it is used.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from collections.abc import Callable
from typing import BinaryIO

from ocibridge.core.streams import PassingReader

_started: set[str] = set()  # each module is loaded by one thread, however many ask
_lock = threading.Lock()


def preload(*modules: str) -> None:
    """Start loading ``modules`` (those not loaded nor being loaded yet) in a daemon thread."""
    with _lock:
        wanted = [name for name in modules if name not in sys.modules and name not in _started]
        _started.update(wanted)
    if wanted:
        threading.Thread(target=_load, args=(wanted,), name="preload", daemon=True).start()


def _load(modules: list[str]) -> None:
    for name in modules:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def loading_at_first_read(open_file: Callable[[], BinaryIO], *modules: str) -> Callable[[], BinaryIO]:
    """``open_file``, each reader it opens starting :func:`preload` of ``modules`` at its first read."""
    def opened() -> BinaryIO:
        return LoadsOnFirstRead(open_file(), *modules)  # type: ignore[return-value]  # a read()-stream standing in for the file it wraps

    return opened


class LoadsOnFirstRead(PassingReader):
    """``raw``, whose first read starts :func:`preload` of ``modules``; seeks pass through
    (an upload's resume)."""

    def __init__(self, raw: BinaryIO, *modules: str):
        super().__init__(raw)
        self._modules = modules

    def read(self, n: int = -1) -> bytes:
        if self._modules:
            modules, self._modules = self._modules, ()
            preload(*modules)
        return self._raw.read(n)
