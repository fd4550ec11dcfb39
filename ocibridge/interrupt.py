"""Prompt Ctrl-C: SIGINT/SIGTERM cancel every transfer in flight, a second one exits at once.

Python delivers a signal to the main thread only; the transfers run on worker threads,
blocked in socket reads and writes that a flag alone cannot reach. So the first signal
sets :data:`CANCELLED`, shuts down every socket opened by the registry transport (tracked
here), which turns each blocked call into an error at once, and raises KeyboardInterrupt in
the main thread. Workers see the flag before any retry (:func:`check`) and stop; stores
keep what was verified and the partial data of the blob in hand (for a later resume). A
second signal while that unwinds ends the process immediately (exit 130).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import weakref
from collections.abc import Iterator
from types import FrameType

#: Set once the user asked to stop; every transfer loop looks at it before going on.
CANCELLED = threading.Event()

EXIT_INTERRUPTED = 130

_sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
_sockets_lock = threading.Lock()


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


def track(sock: socket.socket) -> None:
    """Remember a transfer socket, so that an interrupt can shut it down."""
    with _sockets_lock:
        _sockets.add(sock)
    if CANCELLED.is_set():  # opened while the interrupt was being handled
        _shut(sock)


def cancel_all() -> None:
    """Set :data:`CANCELLED` and unblock every tracked socket."""
    CANCELLED.set()
    with _sockets_lock:
        sockets = list(_sockets)
    for sock in sockets:
        _shut(sock)


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

