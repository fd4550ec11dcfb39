"""One mount in this process: the FUSE loop on a thread of its own, and its end.

The loop is libfuse's (multi-threaded, through mfusepy); it ends when the directory is
unmounted, whoever does it (``unmount`` here, ``ocibridge umount``, ``fusermount3 -u``). Signals
stay Python's: libfuse's own handlers only flag its loop, which a thread of its own does not
see until the next request (measured: a SIGTERM left the mount stale), so Ctrl-C, SIGTERM and
SIGHUP reach the thread that waits, which unmounts. The kernel may cache every answer (``kernel_cache``, long
attribute and entry timeouts): nothing under a mount ever changes.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

from ocibridge.errors import OcibridgeError
from ocibridge.lazymount.kernelcopy import notified_copies
from ocibridge.lazymount.mounttable import FSNAME, is_mounted, unmount_directory
from ocibridge.lazymount.ops import ModelFS
from ocibridge.lazymount.readahead import keep_reply_buffers, raise_read_ahead
from ocibridge.lazymount.replies import MAX_READ, layout_known

#: how long the kernel keeps attributes and names: the tree never changes while mounted
CACHE_SECONDS = 86400
#: threads of the FUSE loop (reads wait on the registry: several at once keep it busy)
THREADS = 16


def _without_read_buf(ops: ModelFS) -> None:
    """Answer through ``read`` where ``read_buf``'s structures are not the ones
    ``lazymount.replies`` writes (a libfuse after 3.16): the binding skips an operation that is
    None."""
    import mfusepy

    if not layout_known(mfusepy.fuse_version_major, mfusepy.fuse_version_minor):
        ops.read_buf = None  # type: ignore[method-assign,assignment]


def fuse_binding() -> Any:
    """mfusepy's ``FUSE`` class, or one error line naming what to install."""
    try:
        import mfusepy
    except ImportError as e:
        if (e.name or "").split(".")[0] != "mfusepy":
            raise
        raise OcibridgeError("ocibridge mount needs a FUSE binding: pip install 'ocibridge[mount]'") from None
    except OSError:  # mfusepy found no libfuse
        raise OcibridgeError("ocibridge mount needs libfuse 3 (Debian, Ubuntu: apt-get install fuse3)") from None
    return mfusepy.FUSE


#: what ends a mount waited for in the foreground, besides an unmount (Ctrl-C is SIGINT)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


class _SignalsToPython:
    """SIGTERM and SIGHUP as Ctrl-C while the loop starts and runs (only the main thread sets
    handlers; libfuse sets its own only where none is set)."""

    def __init__(self) -> None:
        self._before: dict[int, Any] = {}

    def take(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._before = {sig: signal.signal(sig, _interrupt) for sig in STOP_SIGNALS}

    def give_back(self) -> None:
        before, self._before = self._before, {}
        for sig, handler in before.items():
            signal.signal(sig, handler)


class MountSession:
    """``ops`` mounted at ``directory`` once :meth:`start` returns, until :meth:`unmount`."""

    def __init__(self, ops: ModelFS, directory: Path, *, allow_other: bool = False):
        self.ops = ops
        self.directory = directory.absolute()
        self.allow_other = allow_other
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._signals = _SignalsToPython()
        #: whether the mount's read-ahead was raised (its reads asked 1 MiB at a time)
        self.read_ahead_raised = False

    def start(self) -> None:
        """Mount, and return once the kernel answers from it (or raise why it could not)."""
        fuse = fuse_binding()
        _without_read_buf(self.ops)
        self.ops.copies = notified_copies(self.directory)
        if not self.directory.is_dir():
            raise OcibridgeError(f"{self.directory}: not a directory to mount on")
        options: dict[str, Any] = {"foreground": True, "ro": True, "fsname": f"{FSNAME}:{os.getpid()}",
                                   "subtype": FSNAME,
                                   "kernel_cache": True, "attr_timeout": CACHE_SECONDS,
                                   "entry_timeout": CACHE_SECONDS, "negative_timeout": CACHE_SECONDS,
                                   "max_threads": THREADS, "max_idle_threads": THREADS,
                                   "max_read": MAX_READ}  # (ModelFS.init_with_config says it again)
        if self.allow_other:
            options["allow_other"] = True

        def loop() -> None:
            try:
                fuse(self.ops, str(self.directory), **options)
            except BaseException as e:  # noqa: BLE001  # handed to the thread that waits
                self._error = e
            finally:
                self.ops.ready.set()  # (a loop that failed to start: start() must not wait forever)

        self._thread = threading.Thread(target=loop, name=f"fuse {self.directory}", daemon=True)
        here = os.open(".", os.O_RDONLY | os.O_CLOEXEC)
        self._signals.take()
        try:
            self._thread.start()
            self.ops.ready.wait()
        finally:  # libfuse's start (fuse_daemonize) moves the whole process to /, even in the foreground
            os.fchdir(here)
            os.close(here)
        if not self._thread.is_alive() or not is_mounted(self.directory):
            self._thread.join()
            self._signals.give_back()
            why = f": {self._error}" if self._error is not None else " (see libfuse's message above)"
            raise OcibridgeError(f"could not mount {self.directory}{why}")
        self.read_ahead_raised = raise_read_ahead(self.directory)  # (lazymount.readahead: why)
        if self.read_ahead_raised:
            keep_reply_buffers()

    def wait(self) -> None:
        """Until the directory is unmounted; Ctrl-C, SIGTERM, SIGHUP: unmount it, then return."""
        thread = self._thread
        if thread is None:
            return
        try:
            while thread.is_alive():
                thread.join(0.5)
        except KeyboardInterrupt:
            pass
        self.unmount(lazy=True)

    def unmount(self, *, lazy: bool = False) -> None:
        """Unmount (if still mounted) and wait for the loop to end. Also after the loop ended on
        its own (a signal can end it, measured, and leave the mount behind: a dead mount once
        this process exits)."""
        if self._thread is not None and is_mounted(self.directory):
            unmount_directory(self.directory, lazy=lazy)
        if self._thread is not None:
            self._thread.join()
        self._signals.give_back()
