"""A backslash in a model's file name: an ordinary character on POSIX, a separator on Windows.

The Hub keeps a backslash as a character of a name (``folder/..\\..\\..\\file`` is one file in
``folder``), and so does every artifact ocibridge writes: the name is stored as is. Only ``/``
separates folders. Where files are written (pull, mount, exports, hub sync, serve's cache) a
POSIX system writes such a name as the one file it is, never a traversal; a system that reads a
backslash as a separator would see folders and ``..`` in it, so there it is refused with one
line (:func:`refuse_here`). Everything asks :func:`backslash_separates`, so a test can play
Windows by patching that one function.
"""

from __future__ import annotations

import os

from ocibridge.errors import UnsafePath


def backslash_separates() -> bool:
    """Whether this system reads ``\\`` as a folder separator (Windows: ``os.sep`` or ``os.altsep``)."""
    return "\\" in (os.sep, os.altsep)


def refuse_here(path: str, what: str) -> None:
    """:class:`UnsafePath` for a name holding a backslash on a system where it separates folders."""
    if "\\" in path and backslash_separates():
        raise UnsafePath(f"{what} {path!r} holds a backslash, a character of the name but a folder separator "
                         "on this system: it cannot be written here (pull it on Linux or macOS)")


def refuse_in_zip(path: str, what: str) -> None:
    """:class:`UnsafePath` for a zip entry name holding a backslash, on every system: a zip names
    folders with ``/`` only (APPNOTE 4.4.17), and unzip tools (Windows', Info-ZIP's for an archive
    made on Windows) take a backslash for a separator, so the name is no one file there."""
    if "\\" in path:
        raise UnsafePath(f"backslash in {what} {path!r}: a zip entry's name separates folders with '/' only, "
                         "and unzip tools read a backslash as a separator")
