"""How long a read waits for a registry that sends nothing.

A read waits on fetches: a span of chunks, a whole blob, a layer's fill, the chunk table. A
registry that never answers one kept a read (and the program behind it, a ``cat`` of a
mounted file) blocked for as long as the client's timeouts and retries allowed: minutes. With a
bound, a read gives up once the fetch it waits on has made no progress with its blob for that
many seconds since it was asked, whatever is retried meanwhile. Progress is a piece received
from the registry, or a MiB of the blob hashed or copied here (a whole blob is checked, and
copied, once it is in: ~1 s per GiB that is no stall); so a slow registry that keeps sending is
waited for, however long the blob. A read that finds the fetch silent for longer already (the
kernel's second try of a failed read, another reader of the same chunk) gives up at once; the
fetch goes on, and once it ends a later read asks again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from ocibridge.errors import OcibridgeError
from ocibridge.oci.models import Descriptor

T = TypeVar("T")


class Stalled(OcibridgeError):
    """The registry sent nothing of what a read waits for within the bound."""


class StallBound:
    """The bound of one model's reads (``seconds``; None: reads wait as long as the registry
    client does), and when bytes of each of its blobs last arrived (told by the store that
    receives them). Shared by the model's readers (a dict written under the interpreter's
    lock: no lock of its own)."""

    def __init__(self, seconds: float | None = None):
        if seconds is not None and seconds <= 0:
            raise OcibridgeError(f"a read timeout must be a number of seconds above 0, not {seconds:g}")
        self.seconds = seconds
        self._heard: dict[str, float] = {}

    def heard(self, digest: str) -> None:
        """The fetch of blob ``digest`` made progress just now (bytes arrived, or were checked)."""
        self._heard[digest] = time.monotonic()

    def received(self, desc: Descriptor, nbytes: int) -> None:
        """:meth:`heard`, as the registry store's hook on every piece of a blob received
        (``open_repository(on_bytes=)``: chunks, whole blobs, fills, the model cache's fetches)."""
        self.heard(desc.digest)

    def since(self, digest: str, asked: float) -> float:
        """When the silence of a fetch of ``digest`` asked at ``asked`` began."""
        return max(asked, self._heard.get(digest, 0.0))

    def left(self, since: float) -> float | None:
        """Seconds a read may still wait on a fetch silent since ``since`` (None: no bound)."""
        return None if self.seconds is None else since + self.seconds - time.monotonic()

    def stalled(self, where: str) -> Stalled:
        return Stalled(f"{where}: no answer for {self.seconds:g} s: the read gives up")

    def wait(self, future: Future[T], since: Callable[[], float], where: str) -> T:
        """``future``'s result, or :class:`Stalled` once it has been silent too long (``since``:
        when its silence began, asked again as bytes arrive)."""
        while True:
            left = self.left(since())
            if left is not None and left <= 0 and not future.done():
                raise self.stalled(where)
            try:
                return future.result(timeout=None if left is None else max(left, 0.0))
            except TimeoutError:
                if future.done():  # the fetch's own error (a socket's timeout)
                    raise
