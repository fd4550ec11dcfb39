"""The kernel's copy of a mounted file, let go behind a reader that reads the file whole, in order.

The kernel keeps a mounted file's pages (``kernel_cache``: a second open reads them from memory),
so a cold ``cat`` of a mounted GiB leaves two GiB in the page cache: the layer file the fill
writes (or a tar layer's file unpacked to disk), and the kernel's copy of the mounted file; a
pull, one. On a virtual machine whose free memory goes back to its host (free page reporting), a
page new to the guest is a fault the host serves, several times the kernel CPU of a page freed a
moment before (``bench.page_cost``): on a machine just booted the second GiB is a GiB of host
faults (docs/bench-2core-mount-4.md).

So behind a reader whose requests cover the file from its start, in order (:class:`WholeRead`),
the mount tells the kernel to drop its copy of what lies :data:`LAG` behind the furthest request
(libfuse's ``notify_inval_inode``, :class:`NotifiedCopies`): clean pages, nothing is written, and
the reader's next pages are the ones just freed. What was dropped and is read again is asked
again, and answered as every read is (the layer file holds it, verified, or the unpacked file);
a program that maps the file and reads it whole finds the pages behind it unmapped, asked again
if it goes back, and then kept: only an open file's first pass is let go.
A reader that skips (safetensors' ``safe_open``, a tensor here and there) keeps the kernel's copy,
as before.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any, Protocol

MiB = 1024 * 1024
#: how far behind the furthest request the kernel's copy goes: the kernel asks at most its
#: read-ahead (``readahead.READ_AHEAD_KB``, 1 MiB) past what a reader has reached
LAG = 8 * MiB
#: the least let go at a time (one notification each: 128 a GiB)
STEP = 8 * MiB
#: how much of the file below the furthest request may not have been asked yet and the reader
#: still count as whole: libfuse's threads answer a read-ahead's two requests in either order
SLACK = 4 * MiB
#: ``FUSE_CAP_AUTO_INVAL_DATA`` (``fuse_common.h``; libfuse asks it by default): before a read, the
#: kernel asks a file's attributes again once they are stale, to drop its pages if the file changed
CAP_AUTO_INVAL_DATA = 1 << 12


def no_checks_before_reads(conn: Any) -> None:
    """At ``init``: no attributes asked before a read. A mounted file never changes, and each
    notification marks its attributes stale: a ``cat`` waited for a GETATTR after each one."""
    if conn is not None:
        conn.want &= ~CAP_AUTO_INVAL_DATA


class WholeRead:
    """One open file's requests: whether they cover it from its start, and what may be let go.

    Not thread-safe: the caller holds a lock (``ops.ModelFS``)."""

    def __init__(self) -> None:
        self.furthest = 0  # the end of the furthest request
        self.asked = 0  # bytes asked in all
        self.gone = 0  # the kernel's copy of [0, gone) let go (or never kept)
        self.settled = False  # it came back for bytes let go: the kernel keeps its copy from now on

    def asked_for(self, start: int, end: int) -> tuple[int, int] | None:
        """Note a request of ``[start, end)``; the span to let go now, or None. A reader that
        comes back for what was let go (a program that maps the file and goes over it again, as
        llama.cpp's inference does its weights) has it asked once more, then kept: only the first
        pass is let go."""
        if start < self.gone:
            self.settled = True
        if self.settled:
            return None
        self.asked += end - start
        self.furthest = max(self.furthest, end)
        if self.asked + SLACK < self.furthest:  # it skipped: not a whole read
            return None
        upto = (self.furthest - LAG) // STEP * STEP
        if upto - self.gone < STEP:
            return None
        span, self.gone = (self.gone, upto), upto
        return span


class KernelCopies(Protocol):
    """Where the kernel keeps the pages of the mounted files."""

    def let_go(self, path: str, start: int, end: int) -> None:
        """Drop the kernel's pages of ``path``'s bytes ``[start, end)`` (nothing if it cannot).
        Called on a libfuse thread, while it answers a read of ``path``."""
        ...


class KeptCopies:
    """The kernel keeps every page (a mount whose libfuse was not asked: tests, the floor)."""

    def let_go(self, path: str, start: int, end: int) -> None:
        return None


class NotifiedCopies:
    """The kernel told through libfuse 3's ``fuse_lowlevel_notify_inval_inode`` (3.0 on).

    It names a file by the kernel's node id, which libfuse's high-level interface hands to the
    kernel as the file's inode number (``use_ino`` is not set): a ``stat`` of the mounted path
    once per path, kept while the mount runs (the kernel keeps the node: names are cached for
    ``fuseloop.CACHE_SECONDS``). The notification also marks the file's attributes stale."""

    def __init__(self, directory: Path, libfuse: Any):
        self.directory = directory
        self._nodes: dict[str, int] = {}
        # (functions of their own, ``libfuse[name]``: the binding's are typed for its own use)
        self._context = libfuse["fuse_get_context"]
        self._context.restype = ctypes.POINTER(ctypes.c_void_p)  # (struct fuse_context: its fuse first)
        self._session_of = libfuse["fuse_get_session"]
        self._session_of.argtypes, self._session_of.restype = [ctypes.c_void_p], ctypes.c_void_p
        self._notify = libfuse["fuse_lowlevel_notify_inval_inode"]
        self._notify.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int64, ctypes.c_int64]
        self._notify.restype = ctypes.c_int

    def let_go(self, path: str, start: int, end: int) -> None:
        node = self._nodes.get(path)
        if node is None:
            try:
                node = os.stat(self.directory / path.lstrip("/")).st_ino
            except OSError:  # (unmounted meanwhile)
                return
            self._nodes[path] = node
        context = self._context()  # (the request this thread answers: libfuse's; NULL on another thread)
        session = self._session_of(context.contents.value) if context else None
        if session:
            self._notify(session, node, start, end - start)  # (an error: the pages stay, as before)


def notified_copies(directory: Path) -> KernelCopies:
    """:class:`NotifiedCopies` through the libfuse the binding loaded, or :class:`KeptCopies`
    where that is not libfuse 3."""
    import mfusepy

    if mfusepy.fuse_version_major != 3:
        return KeptCopies()
    return NotifiedCopies(directory, mfusepy._libfuse)  # (the binding's own handle: one libfuse)
