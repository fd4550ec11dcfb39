"""Things a user should hear about while a command runs (a transfer resumed where an earlier
run stopped), said by the layer that knows them and shown by the one that owns the terminal.

The stores do not print: they call :func:`say`. The CLI installs a sink that writes one line
to stderr; a library caller hears them on the ``ocibridge`` logger (INFO) unless it installs a
sink of its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Sink = Callable[[str], None]

_LOG = logging.getLogger("ocibridge")
_lock = threading.Lock()
_sink: Sink | None = None


def say(text: str) -> None:
    """Tell the user ``text`` (one line)."""
    with _lock:
        sink = _sink
    if sink is None:
        _LOG.info("%s", text)
    else:
        sink(text)


@contextmanager
def heard_by(sink: Sink) -> Iterator[None]:
    """Send every notice of the block to ``sink``."""
    global _sink
    with _lock:
        previous, _sink = _sink, sink
    try:
        yield
    finally:
        with _lock:
            _sink = previous
