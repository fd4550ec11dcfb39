"""Every use of httpx's and httpcore's private parts, behind one wall.

ocibridge relies on four things neither library documents; each is used only through a
function here, and ``tests/registry/test_httpx_wall.py`` pins them, so an httpx or httpcore release that
changes one fails that test instead of a transfer:

- ``HTTPTransport._pool``, the httpcore pool a transport sends through;
- ``ConnectionPool._network_backend``, so connections open through ocibridge's tracked backend
  (an interrupt shuts their sockets from another thread);
- a transport built around a pool of ours (``HTTPTransport.__new__``), which skips the SSL
  context httpx makes even for plain HTTP (~2.5 ms of every start);
- ``Response._content``, where ``Response.read()`` keeps the body, so ``.content``/``.json()``
  answer from a body read with a bound.

Nothing here runs on import. :func:`defer_cli` is called by the ``ocibridge`` command only,
never by a program that imports ocibridge (which gets ``httpx_defer``'s milder deferral: the
same modules loaded when used, not refused).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: defer_cli must run before httpx is first imported
    import importlib.machinery

    import httpcore
    import httpx


def relied_on() -> dict[type, tuple[str, ...]]:
    """The private names relied on, by owner (what the pinning test checks)."""
    import httpcore
    import httpx

    return {
        httpx.HTTPTransport: ("_pool",),
        httpcore.ConnectionPool: ("_network_backend",),
        httpx.Response: ("_content",),
    }


def use_backend(transport: httpx.HTTPTransport, backend: httpcore.NetworkBackend) -> None:
    """Make ``transport`` open its connections through ``backend``."""
    transport._pool._network_backend = backend  # pinned by relied_on()


def transport_over(pool: httpcore.ConnectionPool) -> httpx.HTTPTransport:
    """An ``httpx.HTTPTransport`` that sends through ``pool``, built without httpx's own pool."""
    import httpx

    transport = httpx.HTTPTransport.__new__(httpx.HTTPTransport)
    transport._pool = pool
    return transport


def keep_body(response: httpx.Response, data: bytes) -> None:
    """Let ``response.content`` and ``response.json()`` answer from ``data``, read by us."""
    response._content = data


_CLI = "httpx._main"
#: what httpcore imports whenever it is installed, to tell trio from asyncio: the command never runs trio
_TRIO = "trio"


class _RefuseCliOnce:
    """Refuses ``httpx._main`` once, the import httpx's ``__init__`` makes, and ``trio`` for
    the process (httpcore tries it from two modules as it loads; the command never runs under
    trio): a meta-path finder by its ``find_spec`` (``importlib.abc`` would cost ~7 ms of the
    start)."""

    def __init__(self) -> None:
        self.cli_refused = False

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name == _CLI and not self.cli_refused:
            self.cli_refused = True
        elif name != _TRIO:
            return None
        raise ModuleNotFoundError(f"{name} is not loaded by the ocibridge command", name=name)


def defer_cli() -> None:
    """Keep httpx's command-line tool (rich, click, pygments: ~30 ms) and trio (~90 ms) out of
    the command's start.

    httpx's ``__init__`` imports ``httpx._main`` whenever those are installed, and falls back to
    a ``main`` that says the CLI is not installed when that import fails; httpcore imports trio
    whenever it is installed (selenium brings it, and subprocess through ctypes), to tell trio
    from asyncio later, and takes asyncio when that import fails. A finder refuses httpx's CLI
    once (nothing is put in ``sys.modules``: a later ``import httpx._main`` loads the real
    module) and trio for the process. Called by :func:`ocibridge.cli.run` only (which never
    runs httpx's CLI nor runs under trio; a program importing ocibridge has both loaded when it
    uses them: ``httpx_defer``), and a no-op once httpx is imported.
    """
    if "httpx" in sys.modules or _CLI in sys.modules:
        return
    if not any(isinstance(finder, _RefuseCliOnce) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RefuseCliOnce())
