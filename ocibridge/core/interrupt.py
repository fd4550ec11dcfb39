"""Prompt Ctrl-C: SIGINT/SIGTERM cancel every transfer in flight, a second one exits at once.

Python delivers a signal to the main thread only; the transfers run on worker threads,
blocked in socket reads and writes that a flag alone cannot reach. So the first signal
sets :data:`CANCELLED`, shuts down every socket opened by the registry transport (tracked
here), which turns each blocked call into an error at once, and raises KeyboardInterrupt in
the main thread. Workers see the flag before any retry (:func:`check`) and stop; stores
keep what was verified and the partial data of the blob in hand (for a later resume). A
second signal while that unwinds ends the process immediately (exit 130).

One exception: a request that registered itself as :func:`finishable` and says it can end
within :data:`GRACE` seconds keeps its socket, and ends (an upload chunk, cut short cleanly
or sent to its end, whose answer keeps the session resumable: distribution refuses a session
whose chunk was cut). Its socket is shut down anyway :data:`GRACE_LIMIT` seconds after the
signal, so the process still stops within a second.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
import weakref
from collections.abc import Iterator
from types import FrameType
from typing import Protocol

#: Set once the user asked to stop; every transfer loop looks at it before going on.
CANCELLED = threading.Event()

EXIT_INTERRUPTED = 130

#: A request in flight that expects to end within this many seconds is let finish,
GRACE = 0.7
#: and its socket is shut down this long after the signal all the same.
GRACE_LIMIT = 0.85

_sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
_sockets_lock = threading.Lock()
_local = threading.local()


class Finishable(Protocol):
    """A request in flight that may be let finish after the first interrupt."""

    def seconds_to_finish(self) -> float | None:
        """The expected time until its answer is in; None when unknown."""


class InFlight:
    """A registered request: its socket (known once it wrote on one) and whether the
    interrupt spared it."""

    def __init__(self, request: Finishable):
        self.request = request
        self.socket: socket.socket | None = None
        self.spared = False

    def bind(self) -> None:
        """Take the socket this thread last wrote on (the request's own, once its headers
        are sent)."""
        self.socket = getattr(_local, "socket", None)

    def check(self) -> None:
        """:func:`check`, except while this request is spared."""
        if CANCELLED.is_set() and not self.spared:
            raise Interrupted


_in_flight: set[InFlight] = set()


class Interrupted(KeyboardInterrupt):
    """Raised in worker threads once the user interrupted; ends the command with 130."""


def check() -> None:
    """Raise :class:`Interrupted` when the user asked to stop."""
    if CANCELLED.is_set():
        raise Interrupted


def sleep(seconds: float) -> None:
    """``time.sleep`` that an interrupt cuts short (and then raises)."""
    if CANCELLED.wait(max(0.0, seconds)):
        raise Interrupted


def writing_on(sock: socket.socket) -> None:
    """Note that this thread writes on ``sock`` (for :meth:`InFlight.bind`)."""
    _local.socket = sock


@contextlib.contextmanager
def finishable(request: Finishable) -> Iterator[InFlight]:
    """Register ``request`` for the block: an interrupt may let it finish (see the module)."""
    flight = InFlight(request)
    with _sockets_lock:
        _in_flight.add(flight)
    try:
        yield flight
    finally:
        with _sockets_lock:
            _in_flight.discard(flight)


def track(sock: socket.socket) -> None:
    """Remember a transfer socket, so that an interrupt can shut it down."""
    with _sockets_lock:
        _sockets.add(sock)
    if CANCELLED.is_set():  # opened while the interrupt was being handled
        _shut(sock)


def cancel_all() -> None:
    """Set :data:`CANCELLED` and unblock every tracked socket, but those of the finishable
    requests that expect to end within :data:`GRACE`; those are shut down at
    :data:`GRACE_LIMIT` unless they ended."""
    CANCELLED.set()
    with _sockets_lock:
        sockets = list(_sockets)
        flights = list(_in_flight)
    spared = [f for f in flights if f.socket is not None and _can_finish(f.request)]
    for flight in spared:
        flight.spared = True
    keep = {id(f.socket) for f in spared}
    for sock in sockets:
        if id(sock) not in keep:
            _shut(sock)
    if spared:
        threading.Thread(target=_end_grace, args=(spared, time.monotonic() + GRACE_LIMIT),
                         name="interrupt-grace", daemon=True).start()


def _can_finish(request: Finishable) -> bool:
    try:
        seconds = request.seconds_to_finish()
    except Exception:  # noqa: BLE001 - an estimate that fails is no estimate
        return False
    return seconds is not None and seconds <= GRACE


def _end_grace(spared: list[InFlight], deadline: float) -> None:
    """The spared requests' time is up: stop them as the others were."""
    time.sleep(max(0.0, deadline - time.monotonic()))
    for flight in spared:
        with _sockets_lock:
            running = flight in _in_flight
        if running:
            flight.spared = False
            if flight.socket is not None:
                _shut(flight.socket)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if CANCELLED.is_set():
        os.write(2, b"ocibridge: interrupted\n")
        os._exit(EXIT_INTERRUPTED)
    cancel_all()
    raise KeyboardInterrupt


@contextlib.contextmanager
def handling_signals() -> Iterator[None]:
    """Install the SIGINT/SIGTERM handlers for the block (main thread only), then restore."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        if not CANCELLED.is_set():  # interrupted: a second signal while exiting still exits at once
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def reset() -> None:
    """Forget an interrupt (for a library caller that goes on after handling one)."""
    CANCELLED.clear()

