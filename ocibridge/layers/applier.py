"""The one reading of an image layer's tar entry: whiteout, opaque marker, aufs metadata, or a
directory, link, file or special file to lay out.

Pull and ``k8s check|mount`` (onto :class:`ocibridge.layers.apply.Tree`) and the reading of
ModelCar images (onto its /models sink) used to decide this each on their own; now
:func:`read_entry` classifies an entry once and :func:`apply_entry` hands it to a
:class:`LayerSink`. What differs between the callers is the sink's, not a second walk: how a name
is cleaned (:meth:`LayerSink.place`: clamped into the image as a runtime's secure join does, or
refused), whether special files are recorded or refused, whether a whiteout may pass a link.
tests/transfer/test_layer_applier.py checks that no other module reads whiteout names.
"""

from __future__ import annotations

import posixpath
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Literal, Protocol

from ocibridge.errors import UnsafePath

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"

EntryKind = Literal["opaque", "whiteout", "aufs", "dir", "symlink", "hardlink", "file", "special", "other"]
#: the kinds that delete (or, aufs metadata, are nothing): no file of their own
DELETIONS = frozenset({"opaque", "whiteout", "aufs"})


class LayerSink(Protocol):
    """What a layer's entries are applied to; the paths it is given are already placed."""

    def place(self, name: str, what: str) -> str | None:
        """Where a tar name (``what``: "tar entry" or "hard link target") lands; None for the
        root itself; an :class:`UnsafePath` for a name the sink refuses."""
        ...

    def opaque_marker(self, path: str) -> None: ...

    def whiteout(self, path: str) -> None: ...

    def add_dir(self, path: str, mode: int, uid: int, gid: int) -> None: ...

    def add_symlink(self, path: str, target: str, uid: int, gid: int) -> None: ...

    def add_hardlink(self, path: str, target: str) -> None: ...

    def add_file(self, path: str, mode: int, size: int, src: IO[bytes] | None, uid: int, gid: int) -> None: ...

    def add_special(self, path: str, kind: str, mode: int, uid: int, gid: int, device: str | None) -> None: ...


@dataclass(frozen=True)
class LayerEntry:
    """One tar entry as an unpacker reads it. ``path`` is the entry's own placed name; for a
    whiteout or aufs metadata ``hidden`` is the name after ``.wh.``."""

    member: tarfile.TarInfo
    kind: EntryKind
    path: str
    hidden: str = ""

    @property
    def deletion(self) -> bool:
        """Whether the entry deletes (a whiteout, an opaque marker) or is aufs metadata."""
        return self.kind in DELETIONS

    @property
    def affected(self) -> str:
        """The path the entry changes: an opaque marker's directory, the name a whiteout
        deletes (checked only when it is applied), else the entry's own path."""
        directory = posixpath.dirname(self.path)
        if self.kind == "opaque":
            return directory
        if self.kind in ("whiteout", "aufs"):
            return posixpath.join(directory, self.hidden) if directory else self.hidden
        return self.path


#: a name rule: :meth:`LayerSink.place` of the sink the entries go to
Place = Callable[[str, str], str | None]


def read_entry(member: tarfile.TarInfo, place: Place) -> LayerEntry | None:
    """Classify ``member``, its name cleaned (or refused) by ``place``; None for the root
    itself. Reading alone (a scan) needs no sink, only its name rule."""
    path = place(member.name, "tar entry")
    if path is None:
        return None
    base = posixpath.basename(path)
    if base == OPAQUE:
        return LayerEntry(member, "opaque", path)
    if base.startswith(WHITEOUT):
        hidden = base[len(WHITEOUT):]
        # other aufs metadata (.wh..wh.plnk, .wh..wh.aufs): no files, nothing deleted
        return LayerEntry(member, "aufs" if hidden.startswith(WHITEOUT) else "whiteout", path, hidden)
    kind: EntryKind
    if member.isdir():
        kind = "dir"
    elif member.issym():
        kind = "symlink"
    elif member.islnk():
        kind = "hardlink"
    elif member.isfile():
        kind = "file"
    elif member.isfifo() or member.ischr() or member.isblk():
        kind = "special"
    else:
        kind = "other"
    return LayerEntry(member, kind, path)


def apply_entry(tar: tarfile.TarFile, entry: LayerEntry, sink: LayerSink) -> None:
    """Lay ``entry`` (read from ``tar``) out on ``sink``, as an unpacker applies it."""
    member, path = entry.member, entry.path
    if entry.kind == "opaque":
        sink.opaque_marker(path)
    elif entry.kind == "whiteout":
        sink.whiteout(whiteout_target(posixpath.dirname(path), entry.hidden))
    elif entry.kind == "aufs":
        return
    elif entry.kind == "dir":
        sink.add_dir(path, member.mode, member.uid, member.gid)
    elif entry.kind == "symlink":
        sink.add_symlink(path, member.linkname, member.uid, member.gid)
    elif entry.kind == "hardlink":
        target = sink.place(member.linkname, "hard link target")
        if target is None:
            raise UnsafePath(f"{path}: hard link to the root")
        sink.add_hardlink(path, target)
    elif entry.kind == "file":
        sink.add_file(path, member.mode, member.size, tar.extractfile(member), member.uid, member.gid)
    elif entry.kind == "special":
        kind = "fifo" if member.isfifo() else "chardev" if member.ischr() else "blockdev"
        device = None if kind == "fifo" else f"{member.devmajor}:{member.devminor}"
        sink.add_special(path, kind, member.mode, member.uid, member.gid, device)
    else:
        raise UnsafePath(f"{path}: unsupported tar entry type in a layer")


def whiteout_target(directory: str, hidden: str) -> str:
    """The path a ``.wh.<hidden>`` entry in ``directory`` deletes; refuse names that are not one
    plain name (``.``, ``..``, empty, or containing a separator or NUL)."""
    if hidden in ("", ".", "..") or "/" in hidden or "\\" in hidden or "\x00" in hidden:
        raise UnsafePath(f"whiteout {posixpath.join(directory, WHITEOUT + hidden)!r} names no single entry")
    return posixpath.join(directory, hidden) if directory else hidden
