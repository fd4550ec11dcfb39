"""Applying image layers as an unpacker does: in order, with whiteouts, never outside the tree.

One :class:`Tree` serves both ``check`` (entries only, nothing written) and ``mount`` (entries
mirrored on disk under a staging root). Every layer is read to its end, so the store's
verifying reader checks its digest, and the uncompressed bytes are hashed to give its diff_id.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from ..confined import check_link, check_links, no_link_on_the_way, whiteout_target
from ..errors import OcibridgeError, UnsafePath
from ..fsutil import safe_relpath
from ..oci.digest import CHUNK, HashingReader
from ..oci.models import Descriptor
from ..stores.base import Store
from ..streams import Reader, gunzip, open_tar_stream, unzstd
from .runtime import TAR_LAYER_TYPES

MAX_EXPANSION_RATIO = 1000
MAX_ENTRIES = 1_000_000
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


@dataclass
class TreeEntry:
    """One path the pod sees under the mount: ``file``, ``dir`` or ``symlink``."""

    path: str
    type: str
    size: int = 0
    mode: int = 0o644
    target: str | None = None

    def to_json(self) -> dict:
        out = {"path": self.path, "type": self.type, "size": self.size, "mode": f"{self.mode:04o}"}
        if self.target is not None:
            out["target"] = self.target
        return out


class Tree:
    """The file tree a mount presents, optionally mirrored under ``root`` on disk."""

    def __init__(self, root: Path | None = None):
        self.root = root
        self.entries: dict[str, TreeEntry] = {}
        self._layer: set[str] = set()

    # -- queries -----------------------------------------------------------------------------
    def sorted(self) -> list[TreeEntry]:
        return [self.entries[p] for p in sorted(self.entries, key=str.encode)]

    def _children(self, path: str) -> list[str]:
        prefix = path + "/"
        return [p for p in self.entries if p.startswith(prefix)]

    def link_at(self, path: str) -> str | None:
        """The target of the symlink at ``path`` in the tree, or None."""
        entry = self.entries.get(path)
        return entry.target if entry is not None and entry.type == "symlink" else None

    def _is_link(self, path: str) -> bool:
        return self.link_at(path) is not None

    def verify_links(self) -> None:
        """Every link, followed through all the others, stays in the tree: a later layer can
        turn a harmless earlier link into an escape (``d/b -> a/../..``, then ``d/a -> ..``)."""
        check_links({e.path: e.target for e in self.entries.values() if e.type == "symlink" and e.target})

    # -- mutations ---------------------------------------------------------------------------
    def begin_layer(self) -> None:
        self._layer = set()

    def remove(self, path: str) -> None:
        no_link_on_the_way(path, self._is_link, what="whiteout of")
        for p in [path, *self._children(path)]:
            self.entries.pop(p, None)
        if self.root is not None:
            disk = self.root / path
            if disk.is_dir() and not disk.is_symlink():
                shutil.rmtree(disk)
            elif disk.exists() or disk.is_symlink():
                disk.unlink()

    def opaque(self, directory: str) -> None:
        """Hide what lower layers put in ``directory``; this layer's entries stay."""
        if directory:
            no_link_on_the_way(directory + "/.wh..wh..opq", self._is_link, what="opaque whiteout")
            if self._is_link(directory):
                raise UnsafePath(f"opaque whiteout in {directory}, which is a symlink")
        for p in sorted(self._children(directory) if directory else list(self.entries), reverse=True):
            if p in self.entries and p not in self._layer and not any(
                q.startswith(p + "/") for q in self._layer
            ):
                self.remove(p)

    def _parents(self, path: str) -> None:
        """Create missing parents (mode 0755, as unpackers do); refuse files and links in the way."""
        parts = path.split("/")[:-1]
        for i in range(len(parts)):
            parent = "/".join(parts[: i + 1])
            entry = self.entries.get(parent)
            if entry is None:
                self.entries[parent] = TreeEntry(parent, "dir", 0, 0o755)
                if self.root is not None:
                    (self.root / parent).mkdir(exist_ok=True)
            elif entry.type == "symlink":
                raise UnsafePath(f"{path}: a parent directory is a symlink ({parent})")
            elif entry.type != "dir":
                raise OcibridgeError(f"{path}: parent {parent} is a file, not a directory")

    def _replace(self, path: str, new_type: str) -> None:
        existing = self.entries.get(path)
        if existing is not None and not (existing.type == "dir" and new_type == "dir"):
            self.remove(path)

    def add_dir(self, path: str, mode: int) -> None:
        self._parents(path)
        self._replace(path, "dir")
        self.entries[path] = TreeEntry(path, "dir", 0, mode & 0o777)
        self._layer.add(path)
        if self.root is not None:
            (self.root / path).mkdir(exist_ok=True)

    def add_file(self, path: str, mode: int, size: int, src: Reader | None) -> None:
        self._parents(path)
        self._replace(path, "file")
        self.entries[path] = TreeEntry(path, "file", size, mode & 0o777)
        self._layer.add(path)
        if self.root is not None and src is not None:
            written = 0
            with open(self.root / path, "xb") as out:
                while written < size:
                    data = src.read(min(CHUNK, size - written))
                    if not data:
                        break
                    out.write(data)
                    written += len(data)
            if written != size:
                raise OcibridgeError(f"{path}: layer ended inside the file")
            os.chmod(self.root / path, mode & 0o777)

    def add_symlink(self, path: str, target: str) -> None:
        check_link(path, target, self.link_at)
        self._parents(path)
        self._replace(path, "symlink")
        self.entries[path] = TreeEntry(path, "symlink", len(target), 0o777, target)
        self._layer.add(path)
        if self.root is not None:
            os.symlink(target, self.root / path)

    def add_hardlink(self, path: str, target: str) -> None:
        source = self.entries.get(target)
        if source is None or source.type != "file":
            raise UnsafePath(f"{path}: hard link to {target}, which is not a file in the tree")
        if target.startswith(path + "/"):  # found by tests/test_fuzz.py
            raise UnsafePath(f"{path}: hard link to {target}, inside the directory it would replace")
        self._parents(path)
        self._replace(path, "file")
        self.entries[path] = TreeEntry(path, "file", source.size, source.mode)
        self._layer.add(path)
        if self.root is not None:
            os.link(self.root / target, self.root / path)

    def finish(self) -> None:
        """Check every link of the finished tree; give directories their final modes, deepest
        first (kept writable while staging)."""
        self.verify_links()
        if self.root is None:
            return
        for entry in sorted(self.entries.values(), key=lambda e: -e.path.count("/")):
            if entry.type == "dir":
                os.chmod(self.root / entry.path, entry.mode | 0o700)


class Bounded:
    """Stops a decompression bomb once more than ``limit`` bytes came out."""

    def __init__(self, raw: Reader, limit: int):
        self._raw, self._limit, self.count = raw, limit, 0

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self.count += len(data)
        if self.count > self._limit:
            raise OcibridgeError(f"layer expands beyond {self._limit} bytes: refusing (bomb limit)")
        return data


def uncompressed(raw: Reader, desc: Descriptor) -> Reader:
    compression = TAR_LAYER_TYPES.get(desc.mediaType)
    if compression is None:
        return raw
    stream = gunzip(raw) if compression == "gzip" else unzstd(raw)
    return Bounded(stream, max(desc.size, 1 << 20) * MAX_EXPANSION_RATIO)


def _entry_path(name: str) -> str | None:
    """The normalised path of a tar entry; None for the root itself."""
    if name.strip("/") in ("", "."):
        return None
    return safe_relpath(name.rstrip("/"), "tar entry")


def apply_layer(store: Store, desc: Descriptor, tree: Tree) -> str:
    """Apply one tar layer to ``tree``; return its diff_id (sha256 of the uncompressed tar)."""
    tree.begin_layer()
    count = 0
    with store.open_blob(desc) as raw:
        hashing = HashingReader(uncompressed(raw, desc))
        with open_tar_stream(hashing) as tar:
            for member in tar:
                count += 1
                if count > MAX_ENTRIES:
                    raise OcibridgeError("tar layer has too many entries (bomb limit)")
                _apply_member(tar, member, tree)
        while hashing.read(CHUNK):
            pass
        while raw.read(CHUNK):
            pass
    return hashing.digest


def _apply_member(tar: tarfile.TarFile, member: tarfile.TarInfo, tree: Tree) -> None:
    path = _entry_path(member.name)
    if path is None:
        return
    directory, base = posixpath.split(path)
    if base == OPAQUE:
        tree.opaque(directory)
        return
    if base.startswith(WHITEOUT):
        hidden = base[len(WHITEOUT):]
        if hidden.startswith(WHITEOUT):  # other aufs metadata (.wh..wh.plnk…): not files
            return
        tree.remove(whiteout_target(directory, hidden))
        return
    if member.isdir():
        tree.add_dir(path, member.mode)
    elif member.issym():
        tree.add_symlink(path, member.linkname)
    elif member.islnk():
        target = _entry_path(member.linkname)
        if target is None:
            raise UnsafePath(f"{path}: hard link to the root")
        tree.add_hardlink(path, target)
    elif member.isfile():
        src = tar.extractfile(member) if tree.root is not None else None
        tree.add_file(path, member.mode, member.size, src)
    else:
        raise UnsafePath(f"{path}: device, fifo or other special file in a layer")
