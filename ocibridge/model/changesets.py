"""The layers of the early CNAI draft (changesets: whiteouts, opaque markers), each unpacked on its
own under the staging directory, then laid over one another in manifest order (:mod:`.extract`).
"""

from __future__ import annotations

import os
import posixpath
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ocibridge.core.fsutil import (
    TEMP_PREFIX,
    is_root_entry,
    link_stays_inside,
    safe_relpath,
)
from ocibridge.core.streams import Reader, open_tar_stream
from ocibridge.errors import OcibridgeError, UnsafePath
from ocibridge.layers.applier import apply_entry, read_entry
from ocibridge.layers.tarwalk import tar_members
from ocibridge.model.stagedfiles import named_as_in_the_artifact, prepare_parent, write_stream
from ocibridge.oci.digest import CHUNK

#: where the layers of the early CNAI draft are unpacked, each on its own, inside the staging
#: directory, before they are laid over one another in manifest order (a name no file may take)
CHANGESETS = TEMP_PREFIX + "changesets"


@dataclass
class Changes:
    """One changeset layer unpacked on its own under ``root``: the files and links it adds, the
    paths its whiteouts delete, the directories its opaque markers empty (of lower layers)."""

    root: Path
    files: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    emptied: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def changeset_place(name: str, what: str) -> str | None:
    """A draft layer's names follow the pull's rule: relative, inside the model, else refused."""
    if what == "tar entry" and is_root_entry(name):
        return None
    rel = safe_relpath(name.rstrip("/"), what)
    if rel.split("/", 1)[0] == CHANGESETS:
        raise UnsafePath(f"{rel}: a name ocibridge keeps for its own staging")
    return rel


class ChangesetSink:
    """A draft layer's entries written under its own root, its deletions recorded (applied when
    the layers are laid over one another); hard links and special files refused as in any pull."""

    def __init__(self, changes: Changes, select: Callable[[str], bool] | None) -> None:
        self.changes, self.select, self.written = changes, select, 0

    def place(self, name: str, what: str) -> str | None:
        return changeset_place(name, what)

    def opaque_marker(self, path: str) -> None:
        self.changes.emptied.append(posixpath.dirname(path))

    def whiteout(self, path: str) -> None:
        self.changes.deleted.append(path)

    def add_dir(self, path: str, mode: int, uid: int, gid: int) -> None:
        prepare_parent(self.changes.root, path + "/x")

    def _target(self, path: str) -> Path | None:
        if self.select is not None and not self.select(path):
            self.changes.skipped.append(path)
            return None
        target = prepare_parent(self.changes.root, path)
        if target.exists() or target.is_symlink():
            raise OcibridgeError(f"duplicate path in a layer: {path}")
        self.changes.files.append(path)
        return target

    def add_symlink(self, path: str, target: str, uid: int, gid: int) -> None:
        if not link_stays_inside(path, target):
            raise UnsafePath(f"{path}: symlink points outside the model ({target})")
        where = self._target(path)
        if where is not None:
            with named_as_in_the_artifact(path):
                os.symlink(target, where)

    def add_hardlink(self, path: str, target: str) -> None:
        raise UnsafePath(f"{path}: unsupported tar entry type (hard link or device)")

    def add_file(self, path: str, mode: int, size: int, src: IO[bytes] | None, uid: int, gid: int) -> None:
        where = self._target(path)
        if where is not None and src is not None:
            with named_as_in_the_artifact(path):
                self.written += write_stream(src, where, 0o755 if mode & 0o111 else 0o644, size)

    def add_special(self, path: str, kind: str, mode: int, uid: int, gid: int, device: str | None) -> None:
        raise UnsafePath(f"{path}: unsupported tar entry type (hard link or device)")


def unpack_changeset(stream: Reader, changes: Changes, select: Callable[[str], bool] | None) -> int:
    """Unpack one draft layer under ``changes.root`` through the one reading of a layer's entries
    (layers/applier.py), reading it to its end (where it is verified)."""
    changes.root.mkdir(parents=True, exist_ok=True)
    sink = ChangesetSink(changes, select)
    with open_tar_stream(stream) as tar:
        for member in tar_members(tar):
            entry = read_entry(member, sink.place)
            if entry is not None:
                apply_entry(tar, entry, sink)
    while stream.read(CHUNK):
        pass
    return sink.written


def lay_over(staging: Path, layers: list[Changes], taken: set[str]) -> dict[str, int]:
    """The draft's layers laid over one another in manifest order, as an unpacker applies
    changesets: a layer's whiteouts and opaque markers delete what the layers below it hold,
    then its files replace theirs (a file over a lower directory, or below a lower file or link,
    replaces it). The files that remain move into the staging root; ``taken`` (raw layers'
    files) may not be written twice. Returns each path moved and the layer it came from."""
    held: dict[str, int] = {}  # path -> the layer whose file it is

    def drop(path: str, *, below_only: bool = False) -> None:
        for rel in [r for r in held if r.startswith(path + "/") or (not below_only and r == path)]:
            del held[rel]

    for at, layer in enumerate(layers):
        for directory in layer.emptied:
            drop(directory, below_only=True) if directory else held.clear()
        for path in layer.deleted:
            drop(path)
        for rel in layer.files:
            parts = rel.split("/")
            for depth in range(1, len(parts)):  # a lower file or link where this one needs a directory
                held.pop("/".join(parts[:depth]), None)
            drop(rel, below_only=True)  # a lower directory this file replaces
            held[rel] = at
    for rel in sorted(held):
        if rel in taken:
            raise OcibridgeError(f"duplicate path in artifact: {rel}")
        with named_as_in_the_artifact(rel):
            os.replace(layers[held[rel]].root / rel, prepare_parent(staging, rel))
    shutil.rmtree(staging / CHANGESETS, ignore_errors=True)
    return dict(sorted(held.items()))
