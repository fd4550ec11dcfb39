"""The file system's answers to the kernel: a read-only tree whose reads are verified.

A plain class with the methods the FUSE binding calls by name (mfusepy looks them up, so the
binding need not be imported to define it). Every failure is an ``OSError`` with an errno:
ENOENT for a path the model lacks, EROFS for a write, and EIO for a read that could not be
verified (a chunk that does not match its table, a blob that does not match its digest, a
registry that fails): the program gets an error, never the bytes, and the mount says which
file on stderr (``report``).
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import os
import stat
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from ocibridge.lazymount.kernelcopy import KeptCopies, KernelCopies, WholeRead, no_checks_before_reads
from ocibridge.lazymount.replies import file_reply, memory_reply, want_spliced_replies
from ocibridge.lazymount.tree import LazyFile, MountTree, Node

_WRITES = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
#: a line saying why a read failed is not said again within this many seconds
REPEAT_SECONDS = 10.0


class _ThreadKept(threading.local):
    """Per libfuse thread: whether its Python thread state is kept (False in a new thread)."""

    kept = False


_threads = _ThreadKept()


def keep_thread_state() -> bool:
    """Keep this thread's Python thread state from one call of the binding to the next.

    libfuse's worker threads are not Python's: each call through a ctypes callback made a new
    thread state and threw it away after (``PyGILState_Ensure``/``Release``), a 16 KiB ``mmap``
    and ``munmap`` of its frame stack and a thread state set up and torn down per request
    (measured: 4,122 of each for a cat of a mounted GiB). One ``Ensure`` more, never released,
    keeps it for the life of the thread (libfuse keeps its idle threads: ``session.THREADS``).
    True when this call kept one (the thread's first)."""
    if _threads.kept:
        return False
    ctypes.pythonapi.PyGILState_Ensure()
    _threads.kept = True
    return True


class LazyReads(Protocol):
    """Bytes ``[start, end)`` of a raw file of the model, verified (``lazyread``'s reader)."""

    def read_file(self, file: LazyFile, start: int, end: int) -> bytes: ...

    def read_into(self, file: LazyFile, start: int, end: int, into: memoryview) -> None:
        """The same bytes, written into ``into`` (``end - start`` long)."""
        ...

    def stable_fd(self, file: LazyFile, start: int, end: int) -> int | None:
        """A descriptor whose bytes ``[start, end)`` are verified and no longer change while
        the file system runs, or None (then ``read_into``)."""
        ...


class _Open:
    """An open file: the lazy file it reads or the descriptor of an unpacked one, and whether it
    is read whole, in order."""

    def __init__(self, path: str, node: Node):
        self.path = path
        self.size = node.size
        self.lazy = node.lazy
        self.whole = WholeRead()
        self.fd = -1 if node.local is None else os.open(node.local, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)


class ModelFS:
    """The operations of one mounted model (thread-safe: the binding runs them on many threads)."""

    use_ns = True  # times as nanoseconds (mfusepy's modern interface)

    def __init__(self, tree: MountTree, reads: LazyReads, report: Callable[[str], None],
                 ready: threading.Event | None = None):
        self.tree = tree
        self.reads = reads
        self.report = report
        self.ready = ready or threading.Event()
        self._uid, self._gid = os.getuid(), os.getgid()
        self._when = time.time_ns()
        self._numbers = itertools.count(1)
        self._open: dict[int, _Open] = {}
        self._said: dict[str, float] = {}  # lines said of failed reads, and when
        self._lock = threading.Lock()
        #: Python thread states kept for the binding's threads (``keep_thread_state``)
        self.thread_states = 0
        #: the kernel's pages of the files, let go behind a whole read (``lazymount.kernelcopy``;
        #: the session sets libfuse's once mounted)
        self.copies: KernelCopies = KeptCopies()

    def init_with_config(self, conn: Any, config: Any) -> None:
        """Called once the kernel has the mount: from now on it answers (replies spliced:
        ``replies.want_spliced_replies``; no attributes asked before reads:
        ``kernelcopy.no_checks_before_reads``)."""
        want_spliced_replies(conn)
        no_checks_before_reads(conn)
        self.ready.set()

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        node = self.tree.node(path)
        nlink = 2 if stat.S_ISDIR(node.mode) else 1
        return {"st_mode": node.mode, "st_size": node.size, "st_nlink": nlink, "st_uid": self._uid,
                "st_gid": self._gid, "st_atime": self._when, "st_mtime": self._when, "st_ctime": self._when,
                "st_blocks": (node.size + 511) // 512, "st_blksize": 1 << 20}

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *self.tree.names(path)]

    def readlink(self, path: str) -> str:
        node = self.tree.node(path)
        if node.local is None or not stat.S_ISLNK(node.mode):
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), path)
        return os.readlink(node.local)

    def open(self, path: str, flags: int) -> int:
        if flags & _WRITES:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        node = self.tree.node(path)
        if not stat.S_ISREG(node.mode):
            raise OSError(errno.EISDIR if stat.S_ISDIR(node.mode) else errno.EINVAL, "not a file", path)
        opened = _Open(path, node)
        with self._lock:
            number = next(self._numbers)
            self._open[number] = opened
        return number

    def _opened(self, path: str, fh: int) -> _Open:
        """The open file ``fh`` (EBADF: none), on a libfuse thread whose Python state is kept."""
        if keep_thread_state():
            with self._lock:
                self.thread_states += 1
        with self._lock:
            opened = self._open.get(fh)
        if opened is None:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF), path)
        return opened

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        opened = self._opened(path, fh)
        if opened.lazy is None:
            got = os.pread(opened.fd, size, offset)
            self._behind(opened, offset, offset + len(got))
            return got
        end = min(offset + size, opened.lazy.size)
        if offset >= end:
            return b""
        try:
            got = self.reads.read_file(opened.lazy, offset, end)
        except Exception as e:  # noqa: BLE001  # whatever failed, the program gets EIO, never bytes
            self._report_once(f"{opened.lazy.key}: {e} (EIO)")
            raise OSError(errno.EIO, os.strerror(errno.EIO), path) from None
        self._behind(opened, offset, end)
        return got

    def read_buf(self, path: str, bufpp: Any, size: int, offset: int, fh: int) -> int:
        """``read``, answered as libfuse's ``read_buf`` (``lazymount.replies``): by a descriptor
        and an offset where the bytes are in a file that no longer changes (an unpacked file; a
        lazy file's verified bytes in the layer file its whole read fills), else in a buffer the
        verified bytes are written into."""
        opened = self._opened(path, fh)
        if opened.lazy is None:
            file_reply(bufpp, opened.fd, offset, size)  # (libfuse's read stops at the file's end)
            self._behind(opened, offset, min(offset + size, opened.size))
            return 0
        lazy = opened.lazy
        end = max(offset, min(offset + size, lazy.size))
        try:
            fd = self.reads.stable_fd(lazy, offset, end)
            if fd is not None:
                file_reply(bufpp, fd, offset, end - offset)
            else:
                memory_reply(bufpp, end - offset, lambda into: self.reads.read_into(lazy, offset, end, into))
        except MemoryError:
            raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM), path) from None
        except Exception as e:  # noqa: BLE001  # whatever failed, the program gets EIO, never bytes
            self._report_once(f"{lazy.key}: {e} (EIO)")
            raise OSError(errno.EIO, os.strerror(errno.EIO), path) from None
        self._behind(opened, offset, end)
        return 0

    def _behind(self, opened: _Open, start: int, end: int) -> None:
        """A read of ``[start, end)`` answered: the kernel's copy behind a whole read let go
        (``lazymount.kernelcopy``: its bytes are in the layer file, or the unpacked file, too)."""
        with self._lock:
            span = opened.whole.asked_for(start, end)
        if span is not None:
            self.copies.let_go(opened.path, *span)

    def _report_once(self, line: str) -> None:
        """Say ``line``, unless it was said within REPEAT_SECONDS: a failed read is tried again
        by the kernel (page by page) and by programs, one line says it."""
        now = time.monotonic()
        with self._lock:
            if now - self._said.get(line, -REPEAT_SECONDS) < REPEAT_SECONDS:
                return
            self._said[line] = now
        self.report(line)

    def release(self, path: str, fh: int) -> int:
        with self._lock:
            opened = self._open.pop(fh, None)
        if opened is not None:
            opened.close()
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        total = sum(node.size for node in self.tree.nodes.values())
        return {"f_bsize": 1 << 20, "f_frsize": 1, "f_blocks": total, "f_bfree": 0, "f_bavail": 0,
                "f_files": len(self.tree.nodes), "f_ffree": 0, "f_namemax": 255}
