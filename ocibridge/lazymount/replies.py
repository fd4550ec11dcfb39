"""Answers to libfuse's ``read_buf``: the bytes of a read, without a Python object in between.

Through ``read``, a read of the mount was a Python ``bytes`` made from the file (pread, one copy),
then copied by the binding into a buffer libfuse had allocated (``memmove``), then written to
the kernel: two copies and a 256 KiB object per request, 4,096 requests per GiB. Through
``read_buf`` the operation hands libfuse a ``struct fuse_bufvec`` of its own, of one buffer:

- *memory* (:func:`memory_reply`): a buffer from ``malloc`` that the read's bytes are written
  into where they are (a ``pread`` from the layer file, or the verified chunks copied once);
- *a file* (:func:`file_reply`): a descriptor and an offset, which libfuse reads itself, in C,
  into the reply (no Python at all for the bytes). Only for bytes that are verified and can no
  longer change while libfuse reads them (``lazymount.ops``). Spliced (:func:`want_spliced_replies`):
  libfuse moves the file's pages into a pipe and the kernel copies them into the reply, not a
  ``pread`` into a buffer of its own and a ``writev`` of it (one copy, and no pinning of that
  buffer, fewer). Its pipe must hold a reply and its header, and a pipe grows past
  ``/proc/sys/fs/pipe-max-size`` (1 MiB by default) only for ``CAP_SYS_RESOURCE``, which root in
  a container may lack: libfuse then gives up splicing for good. So a read asks at most
  :data:`MAX_READ`, which fits a pipe of 1 MiB, and divides a chunk (``chunks.chunktable``):
  the kernel cuts a read and its read-ahead at multiples of it, so no request straddles two
  chunks, and a program's first read waits for its own chunk, not the next one too.

libfuse frees both the vector and a memory buffer (``free``) once it has replied, so both come
from the C library's ``malloc``. The layout is libfuse 3's ``fuse_common.h`` as of 3.0 to 3.16
(:func:`layout_known`; another version is answered through ``read``); the vector is allocated
zeroed, with room to spare, should a later one read a field past ours.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

_libc = ctypes.CDLL(None, use_errno=True)
_malloc = _libc.malloc
_malloc.argtypes = [ctypes.c_size_t]
_malloc.restype = ctypes.c_void_p
_calloc = _libc.calloc
_calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_calloc.restype = ctypes.c_void_p
_free = _libc.free
_free.argtypes = [ctypes.c_void_p]
_free.restype = None

#: ``enum fuse_buf_flags``
BUF_IS_FD = 1 << 1
BUF_FD_SEEK = 1 << 2


class FuseBuf(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("flags", ctypes.c_int), ("mem", ctypes.c_void_p),
                ("fd", ctypes.c_int), ("pos", ctypes.c_int64)]


class FuseBufvec(ctypes.Structure):
    _fields_ = [("count", ctypes.c_size_t), ("idx", ctypes.c_size_t), ("off", ctypes.c_size_t),
                ("buf", FuseBuf * 1)]


#: ``FUSE_CAP_SPLICE_WRITE`` (``fuse_common.h``): replies may be spliced to the kernel
CAP_SPLICE_WRITE = 1 << 7
#: the most one read asks: a reply, its header and libfuse's margin fit a pipe of 1 MiB, and
#: requests end on a chunk's end (1 MiB by default; any power of two from 512 KiB up)
MAX_READ = 512 * 1024


@runtime_checkable
class ReadCapped(Protocol):
    """A connection that says the largest read (libfuse 3's ``fuse_conn_info``; 2's has none)."""

    max_read: int


def want_spliced_replies(conn: Any) -> None:
    """At ``init``: reads of at most :data:`MAX_READ` (``conn`` must say what the mount option
    said), and replies given by descriptor spliced where the kernel can."""
    if conn is None:
        return
    if isinstance(conn, ReadCapped):
        conn.max_read = MAX_READ
    if conn.capable & CAP_SPLICE_WRITE:
        conn.want |= CAP_SPLICE_WRITE


def layout_known(major: int, minor: int) -> bool:
    """Whether libfuse ``major.minor``'s ``struct fuse_bufvec`` is the one written here."""
    return major == 3 and minor <= 16


def _hand_over(bufpp: Any, size: int, *, mem: int | None = None, fd: int = -1, pos: int = 0) -> None:
    """A vector of one buffer, allocated zeroed, put where libfuse looks for it (``*bufpp``)."""
    address = _calloc(1, 2 * ctypes.sizeof(FuseBufvec))
    if not address:
        raise MemoryError
    vec = FuseBufvec.from_address(address)
    vec.count, vec.idx, vec.off = 1, 0, 0
    buf = vec.buf[0]
    buf.size = size
    if mem is None:
        buf.flags, buf.mem, buf.fd, buf.pos = BUF_IS_FD | BUF_FD_SEEK, None, fd, pos
    else:
        buf.flags, buf.mem, buf.fd, buf.pos = 0, mem, -1, 0
    ctypes.cast(bufpp, ctypes.POINTER(ctypes.c_void_p))[0] = address


def file_reply(bufpp: Any, fd: int, pos: int, size: int) -> None:
    """Answer with ``size`` bytes of ``fd`` from ``pos``, read by libfuse after this returns."""
    _hand_over(bufpp, size, fd=fd, pos=pos)


def memory_reply(bufpp: Any, size: int, fill: Callable[[memoryview], None]) -> None:
    """Answer with ``size`` bytes that ``fill`` writes into the buffer it is given (all of it,
    or it raises: the buffer is then freed and nothing is handed over)."""
    if size == 0:
        _hand_over(bufpp, 0, mem=0)
        return
    address = _malloc(size)
    if not address:
        raise MemoryError
    try:
        fill(memoryview((ctypes.c_char * size).from_address(address)).cast("B"))
        _hand_over(bufpp, size, mem=address)
    except BaseException:
        _free(address)
        raise
