"""File-system helpers: atomic writes and safe relative paths from untrusted input."""

from __future__ import annotations

import contextlib
import fcntl
import os
import posixpath
import stat
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, BinaryIO

from ocibridge.core.backslash import refuse_here
from ocibridge.errors import UnsafePath, UsageError

TEMP_PREFIX = ".ocibridge-tmp-"

_umask: int | None = None
_umask_lock = threading.Lock()


def process_umask() -> int:
    """The process umask, read once. ``mkstemp`` creates files 0600 whatever the umask; files
    meant to be shared (a layout, an exported archive) are chmod-ed to what ``open`` would
    have made. Linux exposes the umask in /proc without changing it; elsewhere it is set and
    restored once, under a lock."""
    global _umask
    with _umask_lock:
        if _umask is None:
            _umask = _read_umask()
        return _umask


def _read_umask() -> int:
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def shared_file_mode(executable: bool = False) -> int:
    """The mode ``open()`` would give a new file under the current umask."""
    return (0o777 if executable else 0o666) & ~process_umask()


def refuse_special_target(final: str | os.PathLike[str]) -> None:
    """A file staged beside ``final`` is renamed over it: one there that is no regular file (a
    device such as /dev/null, a pipe such as /dev/stdout) would be replaced by a plain file, not
    written to (for root, /dev/null itself), so it is refused before anything is written."""
    if os.path.exists(final) and not os.path.isfile(final) and not os.path.isdir(final):  # links followed
        raise UsageError(f"{os.fspath(final)} is not a regular file (a device or a pipe): name a file to write")


def refuse_read_only_target(final: str | os.PathLike[str]) -> None:
    """rename(2) replaces a file whatever its mode, so a file the user made read-only (no write
    bit for anyone), or one this user may not write, would be replaced silently where ``cp``,
    ``tar -f`` and ``curl -o`` refuse: it is refused first. The bits are read for root too, who
    may write anything: a mode set on purpose says keep it."""
    try:
        mode = os.stat(final).st_mode  # links followed: the file the user named
    except OSError:
        return  # not there (or not reachable): nothing to keep
    if stat.S_ISREG(mode):
        _refuse_unwritable(final, mode, "make it writable (chmod u+w) or remove it to replace it")


def refuse_read_only_directory(directory: str | os.PathLike[str]) -> None:
    """A pull stages inside the directory it writes into and renames files there: one with no
    write bit for anyone is kept as it is, root or not (root may write into it, as
    :func:`refuse_read_only_target` reads a file's bits), and one this user may not write into
    is named, not the staging file that could not be made in it."""
    try:
        mode = os.stat(directory).st_mode
    except OSError:
        return
    if stat.S_ISDIR(mode):
        _refuse_unwritable(directory, mode, "make it writable (chmod u+w) to write into it")


def _refuse_unwritable(path: str | os.PathLike[str], mode: int, fix: str) -> None:
    if mode & 0o222 == 0:
        raise UsageError(f"{os.fspath(path)} is read-only (mode {stat.S_IMODE(mode):04o}): refused, nothing "
                         f"written; {fix}")
    if not os.access(path, os.W_OK):
        raise UsageError(f"{os.fspath(path)} is not writable by this user: refused, nothing written")


def check_output_file(final: str | os.PathLike[str]) -> None:
    """The checks of a file a user names as a command's output, before anything is written: the
    staged file is renamed over it, which would replace a device, a pipe or a read-only file."""
    refuse_special_target(final)
    refuse_read_only_target(final)


@contextlib.contextmanager
def atomic_writer(final: Path, mode: int | None = None) -> Iterator[BinaryIO]:
    """Write to a temporary file beside ``final``; rename into place only if the block succeeds.

    Without ``mode`` the file gets the umask's default (not mkstemp's 0600)."""
    refuse_special_target(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=final.parent)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held while written: an unlocked one is an orphan (stale.py)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
        os.chmod(tmp, shared_file_mode() if mode is None else mode)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


#: Bytes per write(2) at most. On the Firecracker VMs measured (Linux 6.18 with free page
#: reporting), large writes into the page cache get large page-cache folios, and in the
#: stretches when the host is taking freed memory back those cost several times the system
#: time: a 1 GiB pull in 256 KiB writes took 2.20-4.07 s (sys 1.05-3.64 s), in 64 KiB writes
#: 2.26-2.68 s, in 32 KiB writes 1.92-2.32 s (sys 1.13-1.28 s), curl (4-16 KiB writes)
#: 1.42-1.63 s; 512 KiB writes were slow even outside those stretches (1 GiB 1.65-2.52 s
#: against 0.30-0.38 s in 256 KiB). Outside them 32 KiB costs ~0.1 s per GiB more than 256.
WRITE_MAX = 32 * 1024


def write_sliced(out: IO[bytes], data: bytes | bytearray | memoryview) -> None:
    """``out.write(data)`` in calls of at most :data:`WRITE_MAX` bytes."""
    if len(data) <= WRITE_MAX:
        out.write(data)
        return
    view = memoryview(data)
    for start in range(0, len(view), WRITE_MAX):
        out.write(view[start:start + WRITE_MAX])


#: the most parts one writev(2) takes (the kernel's IOV_MAX)
IOV_MAX = 1024


def writev_all(fd: int, parts: Sequence[bytes | bytearray | memoryview]) -> int:
    """Write ``parts`` to ``fd`` in order, in as few writev(2) calls as the kernel takes (one
    for up to :data:`IOV_MAX` parts, unless it takes less): no joined copy of them. Their size."""
    size = 0
    for start in range(0, len(parts), IOV_MAX):
        todo = [memoryview(p) for p in parts[start:start + IOV_MAX]]
        size += sum(len(p) for p in todo)
        while todo:
            done = os.writev(fd, todo)
            rest: list[memoryview] = []
            for p in todo:  # after a short write: what is left, from where it stopped
                if done >= len(p):
                    done -= len(p)
                else:
                    rest.append(p[done:])
                    done = 0
            todo = rest
    return size


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
    """All of ``data`` at ``offset``, in calls of at most :data:`WRITE_MAX` bytes."""
    view = memoryview(data)
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:done + WRITE_MAX], offset + done)


def pread_full(fd: int, size: int, offset: int) -> bytes:
    """``size`` bytes at ``offset``, fewer only at the file's end: one pread(2) returns at most
    0x7ffff000 bytes on Linux, so a read of 2 GiB or more at once takes two."""
    data = os.pread(fd, size, offset)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size and (more := os.pread(fd, size - got, offset + got)):
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def pread_into(fd: int, into: memoryview, offset: int) -> int:
    """``pread_full`` into a buffer: fills ``into`` from ``offset``; the bytes read (fewer only
    at the file's end)."""
    got = 0
    while got < len(into) and (n := os.preadv(fd, [into[got:]], offset + got)):
        got += n
    return got


def atomic_write_bytes(final: Path, data: bytes, mode: int | None = None) -> None:
    with atomic_writer(final, mode) as f:
        f.write(data)


def is_utf8_name(name: str) -> bool:
    """Whether a file name read from the disk is UTF-8: a byte that is not reaches Python as a lone
    surrogate, which no JSON document, annotation or tar header of an artifact can hold."""
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


def safe_relpath(path: str, what: str = "path", *, here: bool = True) -> str:
    """Normalise a relative POSIX path from untrusted input (``./model//x`` is ``model/x``, as
    tar and unzip read it); refuse absolute paths and escapes. Only ``/`` separates: a
    backslash is a character of a name (``a/..\\x`` is the file ``..\\x`` in ``a``), refused
    only where it would be written on a system that reads it as a separator (``here``:
    :mod:`.backslash`). A name starting with a backslash or a drive (``C:``) is absolute on
    Windows, and refused everywhere."""
    if not path or "\x00" in path:
        raise UnsafePath(f"empty or NUL-containing {what}")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":") or path.startswith("\\"):
        raise UnsafePath(f"absolute {what} {path!r}")
    if here:
        refuse_here(path, what)
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise UnsafePath(f"{what} {path!r} escapes its tree")
    if not parts:
        raise UnsafePath(f"{what} {path!r} names the tree's root, not a file in it")
    return "/".join(parts)


def is_root_entry(name: str) -> bool:
    """Whether an archive member names the archive's root itself: the ``./`` entry
    ``tar -C DIR -cf x.tar .`` and bsdtar's zips begin with (a directory, skipped)."""
    return name.strip("/") in ("", ".")


def link_stays_inside(link_path: str, target: str, root: str = "") -> bool:
    """Whether a symlink at ``link_path`` (relative) pointing at ``target`` stays under ``root``."""
    if target.startswith("/"):
        return False
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(link_path), target))
    if resolved == ".." or resolved.startswith("../") or resolved.startswith("/"):
        return False
    if root:
        return resolved == root or resolved.startswith(root.rstrip("/") + "/")
    return True
