"""The one reader of small files: refs, records, settings, markers, signatures, keys, jobs.

A file found in a place others can write (a Hub cache, the model cache, a layout, the settings
directory) may be a FIFO, whose ``open`` blocks for ever, or a link to ``/dev/zero``, which never
ends: such a file is opened without blocking, must be a regular file (``fstat`` of what was
opened, so no check-then-open race) and is read only up to its cap. A file the user names on
the command line may be a FIFO or ``/dev/stdin`` on purpose (``--key <(…)``): it is read
blocking, any type, but never past the cap either.
"""

from __future__ import annotations

import errno
import os
import stat

from ocibridge.errors import OcibridgeError, TooLarge

#: The cap of a ref, a lock's content, a record or a marker: a few lines of text.
MAX_TINY_FILE = 64 << 10


def read_small(path: str | os.PathLike[str], limit: int, what: str, *,
               error: type[OcibridgeError] = OcibridgeError, named: bool = False, follow: bool = True) -> bytes:
    """The bytes of ``path``, at most ``limit`` of them, or one error line naming ``what``.

    ``named``: the user named this file (FIFOs and devices allowed, read blocking); otherwise it
    was found and must be a regular file. ``follow=False``: a symlink is refused (``O_NOFOLLOW``).
    A missing file raises ``FileNotFoundError`` as ``open`` does, for callers that allow it.
    """
    flags = os.O_RDONLY | os.O_CLOEXEC
    if not named:
        flags |= os.O_NONBLOCK | os.O_NOCTTY
    if not follow:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as e:
        if e.errno == errno.ELOOP and not follow:  # ELOOP: the last component is a link
            raise error(f"{what} {path}: a symbolic link, not followed here: refused") from None
        raise error(f"{what} {path}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not named and not stat.S_ISREG(st.st_mode):
            raise error(f"{what} {path}: not a regular file ({_kind(st.st_mode)}): refused")
        if stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise TooLarge(f"{what} {path}: larger than {limit} bytes, refused")
        if not named:
            os.set_blocking(fd, True)  # a regular file: O_NONBLOCK only kept open() from waiting
        parts: list[bytes] = []
        left = limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            parts.append(chunk)
            left -= len(chunk)
    except OSError as e:
        raise error(f"{what} {path}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    data = b"".join(parts)
    if len(data) > limit:
        raise TooLarge(f"{what} {path}: larger than {limit} bytes, refused")
    return data


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


__all__ = ["MAX_TINY_FILE", "read_small"]
