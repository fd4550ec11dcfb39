"""The bottom of the transport stack: connections an interrupt can shut down, TLS built late.

httpcore opens the connections; a Ctrl-C must reach the ones blocked in a read or a write on
worker threads. This backend opens them as httpcore's own does and registers each socket;
each write notes its socket for the writing thread, so that a request the interrupt lets
finish (an upload chunk) is known by its socket, and a body may be written straight onto a
plain one (:func:`plain_socket_writing`).
:class:`NetworkTransport` picks plain HTTP, TLS or the proxy the environment names for each
request.
"""

from __future__ import annotations

import socket
import ssl
import threading
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any

import httpcore
import httpx

from ocibridge.core import interrupt
from ocibridge.core.httpx_wall import transport_over, use_backend


class _Writing(threading.local):
    plain: socket.socket | None = None  # each thread's own: see plain_socket_writing


_writing = _Writing()


def plain_socket_writing() -> socket.socket | None:
    """The plain (not TLS) socket this thread has written a request on and not read an answer
    from since: asked by a request's body, the socket its headers just went out on. None when
    that request is over TLS, or was not sent through this backend."""
    return _writing.plain


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
        if sock is None:
            return stream
        interrupt.track(sock)
        return _NotedStream(stream, sock)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        interrupt.check()
        stream = self._backend.connect_unix_socket(path, timeout, socket_options)
        return _NotedStream(stream, stream.get_extra_info("socket"), plain=False)

    def sleep(self, seconds: float) -> None:
        interrupt.sleep(seconds)


class _NotedStream(httpcore.NetworkStream):
    """httpcore's stream, telling :mod:`interrupt` which socket the writing thread uses, and a
    request's body which plain socket its headers went out on."""

    def __init__(self, stream: httpcore.NetworkStream, sock: Any, plain: bool = True):
        self._stream = stream
        self._sock = sock
        self._plain = plain and type(sock) is socket.socket

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        _writing.plain = None  # an answer is read: the request's body is over
        return self._stream.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self._sock is not None:
            interrupt.writing_on(self._sock)
        _writing.plain = self._sock if self._plain else None
        self._stream.write(buffer, timeout)

    def close(self) -> None:
        if _writing.plain is self._sock:
            _writing.plain = None
        self._stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _NotedStream(self._stream.start_tls(ssl_context, server_hostname, timeout), self._sock, plain=False)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


def tracked_transport(**options: Any) -> httpx.HTTPTransport:
    """An ``httpx.HTTPTransport`` whose connections an interrupt shuts down."""
    transport = httpx.HTTPTransport(**options)
    use_backend(transport, TrackedBackend())
    return transport


def plain_transport(limits: httpx.Limits) -> httpx.HTTPTransport:
    """:func:`tracked_transport` for plain HTTP without a proxy, built without an SSL context.

    ``httpx.HTTPTransport`` makes one even for ``verify=False`` (OpenSSL's first context: ~2.5
    ms of every start, 1 % of a copy within a loopback registry), which no plain-HTTP
    connection uses. The pool is the one httpx would build (HTTP/1.1, the same limits); were
    an https URL ever sent to it, httpcore would verify with its default context.
    """
    return transport_over(httpcore.ConnectionPool(
        ssl_context=None,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=TrackedBackend(),
    ))


#: How to verify a host's certificate, called when the first https request needs it.
VerifyFactory = Callable[[], "ssl.SSLContext | bool"]


class NetworkTransport(httpx.BaseTransport):
    """Sends requests over the network. Plain HTTP goes through a transport without
    certificates; the verifying TLS transport is built on the first https request, since
    building it parses the CA bundle (~25 ms at every start), which a plain-HTTP (loopback)
    registry never needs unless it redirects to https. A proxy named by ``HTTPS_PROXY``,
    ``HTTP_PROXY`` or ``ALL_PROXY`` (and not bypassed by ``NO_PROXY``) carries the request."""

    def __init__(self, verify: VerifyFactory, limits: httpx.Limits):
        self._verify = verify
        self._limits = limits
        self._transports: dict[tuple[str, str | None], httpx.HTTPTransport] = {}
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._transport_for(request.url).handle_request(request)
        response.request = request  # what httpx.Client.send sets; the layers above read it
        return response

    def _transport_for(self, url: httpx.URL) -> httpx.HTTPTransport:
        tls = url.scheme == "https"
        proxy = _proxy_for(url)
        key = ("https" if tls else "http", proxy)
        with self._lock:
            transport = self._transports.get(key)
            if transport is None and not tls and proxy is None:
                transport = self._transports[key] = plain_transport(self._limits)
            elif transport is None:
                options: dict[str, Any] = {"verify": self._verify() if tls else False,
                                           "limits": self._limits}
                if proxy is not None:
                    options["proxy"] = proxy
                transport = self._transports[key] = tracked_transport(**options)
        return transport

    def close(self) -> None:
        with self._lock:
            transports, self._transports = list(self._transports.values()), {}
        for transport in transports:
            transport.close()


def _proxy_for(url: httpx.URL) -> str | None:
    """The proxy URL the environment names for ``url``, or None (as httpx's own client reads
    the proxy variables, which it does only when it builds the transport itself)."""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    if not proxy:
        return None
    host = url.host if url.port is None else f"{url.host}:{url.port}"
    if urllib.request.proxy_bypass(host):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"
