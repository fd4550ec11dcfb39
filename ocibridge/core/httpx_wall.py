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

Nothing here runs on import (what httpx and httpcore import as they load is put off by
``httpx_defer``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used
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


def wrap_backend(transport: httpx.HTTPTransport, wrap: Callable[[httpcore.NetworkBackend], Any],
                 core: Any = None) -> None:
    """Make ``transport`` open its connections through ``wrap`` of the backend it has; a TypeError
    where it sends through no direct connection pool (an explicit proxy's). ``core``: the httpcore
    the transport's httpx is over (httpcore2 for huggingface_hub's httpx2, the same private names)."""
    if core is None:
        import httpcore as core

    pool = transport._pool
    if not isinstance(pool, core.ConnectionPool) or isinstance(pool, (core.HTTPProxy, core.SOCKSProxy)):
        raise TypeError("the transport is not a direct connection pool")
    pool._network_backend = wrap(pool._network_backend)  # pinned by relied_on()


def transport_over(pool: httpcore.ConnectionPool) -> httpx.HTTPTransport:
    """An ``httpx.HTTPTransport`` that sends through ``pool``, built without httpx's own pool."""
    import httpx

    transport = httpx.HTTPTransport.__new__(httpx.HTTPTransport)
    transport._pool = pool
    return transport


def keep_body(response: httpx.Response, data: bytes) -> None:
    """Let ``response.content`` and ``response.json()`` answer from ``data``, read by us."""
    response._content = data

