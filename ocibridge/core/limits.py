"""Caps on what ocibridge reads from untrusted input, each raised (or lowered) by an
environment variable, so a user with a genuinely large input is never stuck.

Every cap is computed from bytes actually read, never from a size an artifact declares.
"""

from __future__ import annotations

import os
import re
from typing import BinaryIO

from ocibridge.errors import OcibridgeError

_NUMBER = re.compile(r"[0-9]{1,19}")


def env_limit(name: str, default: int) -> int:
    """``$name`` when it spells a positive integer in ASCII digits, else ``default``."""
    value = os.environ.get(name, "").strip()
    if _NUMBER.fullmatch(value) and int(value) > 0:
        return int(value)
    return default


def over_limit(what: str, limit: int, env: str) -> str:
    """The one-line reason for refusing ``what`` beyond ``limit``, naming the override."""
    return f"{what} is larger than {limit} bytes, refused (raise ${env} if it is genuine)"


#: Small files read whole that the user names (mirror jobs, keys, bundles, auth files): a
#: device or FIFO states size 0, so each is read with a cap instead of trusting ``stat``.
MAX_SMALL_INPUT = 16 << 20


def read_at_most(path: str | os.PathLike[str], cap: int) -> bytes:
    """At most ``cap + 1`` bytes of ``path``: one byte more tells the caller it is too long,
    and no more is ever read (``/dev/zero`` included). Raises OSError as ``open`` does."""
    with open(path, "rb") as f:
        return read_capped(f, cap)


def read_small_file(path: str | os.PathLike[str], cap: int, what: str,
                    unreadable: type[OcibridgeError] = OcibridgeError) -> bytes:
    """A small file the user names (a key, a job, a signature), whole: one error line when it
    cannot be read (as ``unreadable``, ``what PATH: reason``) or holds more than ``cap`` bytes
    (:class:`TooLarge`, read no further than that)."""
    from ocibridge.core.smallfile import read_small

    try:  # the one small-file reader; the user named this file, so a FIFO is theirs to give
        return read_small(path, cap, what, error=unreadable, named=True)
    except OSError as e:
        raise unreadable(f"{what} {path}: {e.strerror or e}") from None


def read_capped(f: BinaryIO, cap: int) -> bytes:
    """At most ``cap + 1`` bytes of ``f``, in steps of 1 MiB: ``f.read(cap + 1)`` would
    allocate the whole cap up front, even for a file of a few bytes."""
    parts: list[bytes] = []
    left = cap + 1
    while left > 0 and (chunk := f.read(min(left, 1 << 20))):
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)
