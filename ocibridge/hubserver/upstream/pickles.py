"""Pickle-bearing files known by their content, whatever their name: the proxy refuses them unless
``--upstream-allow-pickle`` (loading one runs code). Read as the file arrives (the tee's first
bytes) and once it is whole (a zip's entries), before its last byte reaches a reader and before
anything of its commit reaches the registry:

- a pickle stream: the PROTO opcode (0x80) and a protocol from 2 to 5 (every pickle torch, joblib
  and numpy write since Python 2.3 starts so);
- a NumPy ``.npy`` whose dtype holds Python objects (``'O'``: stored as a pickle);
- a zip whose entries include a ``.pkl`` (``torch.save``'s ``archive/data.pkl``, a ``.npz`` of
  objects' pickles): the first entry is seen in the first bytes, every entry once the file is whole.

Not a scanner: a pickle of protocol 0 or 1 (text) has no magic, and only the names rule
(door.PICKLE) keeps it out."""

from __future__ import annotations

import re
import struct
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from ocibridge.hubserver.upstream.errors import UpstreamRefused

if TYPE_CHECKING:
    from ocibridge.hubserver.upstream.settings import UpstreamSettings

#: bytes of a file's start read for its kind (a .npy header fits well within)
HEAD = 4096
FLAG = "--upstream-allow-pickle"
_NPY_OBJECT = re.compile(rb"'descr':\s*(?:'[|<>=]?O'|\[.*'[|<>=]?O')", re.DOTALL)


class PickleFound(UpstreamRefused):
    """A file of the commit is pickle-bearing: the commit is refused, nothing of it lands."""


def _zip_entry_pickled(name: str) -> bool:
    return name.lower().endswith(".pkl")


def pickled_head(head: bytes) -> str | None:
    """What makes a file starting with ``head`` pickle-bearing; None when its start says nothing."""
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return f"a pickle (protocol {head[1]})"
    if head.startswith(b"\x93NUMPY") and len(head) >= 10:
        size, start = (struct.unpack_from("<H", head, 8)[0], 10) if head[6] == 1 \
            else (struct.unpack_from("<I", head, 8)[0], 12) if len(head) >= 12 else (0, 12)
        if _NPY_OBJECT.search(head[start:start + size]):
            return "a NumPy array of Python objects (pickled)"
    if head.startswith(b"PK\x03\x04") and len(head) >= 30:
        length = struct.unpack_from("<H", head, 26)[0]
        name = head[30:30 + length].decode("utf-8", "replace")
        if len(head) >= 30 + length and _zip_entry_pickled(name):
            return f"a zip holding {name} (a pickle: torch.save's format)"
    return None


def pickled_file(path: Path) -> str | None:
    """What makes the whole file at ``path`` pickle-bearing by its zip entries; None otherwise."""
    try:
        if not zipfile.is_zipfile(path):
            return None
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (OSError, zipfile.BadZipFile, ValueError):
        return None
    pickled = [n for n in names if _zip_entry_pickled(n)]
    return f"a zip holding {pickled[0]} (a pickle)" if pickled else None


def refused(repo_id: str, commit: str, path: str, why: str) -> PickleFound:
    return PickleFound(f"{repo_id}@{commit}: not fetched from the upstream: {path} is {why}: pickle formats, "
                       f"which run code when loaded, are refused unless {FLAG}", FLAG)


class PickleSniff:
    """Fed a file's bytes in order: :attr:`found` says, once its first bytes came, whether they are
    a pickle-bearing file's."""

    def __init__(self) -> None:
        self._head = bytearray()
        self.found: str | None = None

    def update(self, data: bytes | memoryview) -> str | None:
        if self.found is None and len(self._head) < HEAD:
            self._head += bytes(data[:HEAD - len(self._head)])
            self.found = pickled_head(bytes(self._head))
        return self.found


class FilesDoor:
    """The door's file rules (``--upstream-refuse-files``, the pickle names) decided again on the
    listing the fetch downloads, which is what the registry gets (model_info's ``siblings``, which
    the door read first, may leave files out), and whether each file's content is read for a pickle."""

    def __init__(self, settings: UpstreamSettings):
        self.settings = settings
        self.sniffs = not settings.allow_pickle

    def listed(self, repo_id: str, commit: str, paths: list[str]) -> None:
        """:class:`UpstreamRefused` when a listed file is refused by the rules (nothing fetched)."""
        found = self.settings.files_refused(paths)
        if found is None:
            return
        names, rule = found
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        if rule == FLAG:
            raise PickleFound(f"{repo_id}@{commit}: not fetched from the upstream: {shown} (pickle formats, which "
                              f"run code when loaded) refused unless {FLAG}", FLAG)
        raise UpstreamRefused(f"{repo_id}@{commit}: not fetched from the upstream: {shown} refused by {rule}", rule)
