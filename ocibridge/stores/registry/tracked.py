"""A network backend whose sockets an interrupt can shut down (see :mod:`ocibridge.interrupt`).

httpcore opens the connections; a Ctrl-C must reach the ones blocked in a read or a write on
worker threads. This backend opens them as httpcore's own does and registers each socket.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from ... import interrupt


class TrackedBackend(httpcore.NetworkBackend):
    """httpcore's synchronous backend, registering every socket it opens."""

    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        interrupt.check()
        stream = self._backend.connect_tcp(host, port, timeout, local_address, socket_options)
        sock = stream.get_extra_info("socket")
        if sock is not None:
            interrupt.track(sock)
        return stream

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        interrupt.check()
        return self._backend.connect_unix_socket(path, timeout, socket_options)

    def sleep(self, seconds: float) -> None:
        interrupt.sleep(seconds)


def tracked_transport(**options: Any) -> httpx.HTTPTransport:
    """An ``httpx.HTTPTransport`` whose connections an interrupt shuts down."""
    transport = httpx.HTTPTransport(**options)
    pool = getattr(transport, "_pool", None)
    if pool is not None and hasattr(pool, "_network_backend"):
        pool._network_backend = TrackedBackend()
    return transport
