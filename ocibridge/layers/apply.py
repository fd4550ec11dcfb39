"""Applying image layers as an unpacker does: in order, with whiteouts, never outside the tree.

One :class:`Tree` serves both ``check`` (entries only, nothing written) and ``mount`` (entries
mirrored on disk under a staging root). Every layer is read to its end, so the store's
verifying reader checks its digest, and the uncompressed bytes are hashed to give its diff_id.

The rules are the ones containerd's and containers/storage's unpackers follow on overlayfs, the
snapshotter/driver of a node, as tests/k8s/test_k8s_runtimes.py checks on the real runtimes: modes
keep setuid/setgid/sticky, owners are kept, a symlink may point anywhere (it is only resolved
inside the pod), an entry below a symlink of an earlier layer turns that link into a directory,
one below a symlink of the same layer lands where the link leads (resolved here, scoped to the
image: never by the kernel), a name climbing above the root is cleaned into the image, and
a hard link to a file of an earlier layer fails (overlayfs unpacks each layer on its own).
containers/storage (CRI-O) makes the parents a layer implies afresh (0755, root); containerd
keeps the lower directory's mode and owner.
"""

from __future__ import annotations

import os
import posixpath
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocibridge.core.confined import MAX_LINK_HOPS, check_link, no_link_on_the_way
from ocibridge.core.fsutil import write_sliced
from ocibridge.core.streams import Reader, open_tar_stream
from ocibridge.errors import OcibridgeError, UnsafePath
from ocibridge.layers.applier import apply_entry, read_entry
from ocibridge.layers.reader import open_layer, readable_layer
from ocibridge.layers.tarwalk import tar_members
from ocibridge.oci.digest import CHUNK, HashingReader
from ocibridge.oci.mediatypes import TAR_LAYER_TYPES
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import Store


@dataclass
class TreeEntry:
    """One path the pod sees under the mount: ``file``, ``dir``, ``symlink``, ``fifo``,
    ``chardev`` or ``blockdev``."""

    path: str
    type: str
    size: int = 0
    mode: int = 0o644  # permission bits with setuid, setgid and sticky
    target: str | None = None  # a symlink's target; ``major:minor`` of a device
    uid: int = 0
    gid: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "type": self.type, "size": self.size, "mode": f"{self.mode:04o}",
                     "uid": self.uid, "gid": self.gid}
        if self.target is not None:
            out["device" if self.type.endswith("dev") else "target"] = self.target
        return out


class Tree:
    """The file tree a mount presents, optionally mirrored under ``root`` on disk."""

    def __init__(self, root: Path | None = None, *, fresh_parents: bool = False):
        self.root = root
        self.entries: dict[str, TreeEntry] = {}
        self._layer: set[str] = set()
        #: containers/storage (CRI-O, podman) creates the parents of a layer's entries afresh in
        #: that layer (0755, root), hiding the lower directory's mode and owner on overlayfs;
        #: containerd copies them from the lower layers.
        self.fresh_parents = fresh_parents
        self._fresh: set[str] = set()
        self._as_root = os.geteuid() == 0
        #: what the tree holds but the disk copy could not (ownership without root)
        self.not_reproduced: list[str] = []
        #: (name, where it landed) for tar names that climbed above the root or were absolute
        self.confined: list[tuple[str, str]] = []

    # -- names -------------------------------------------------------------------------------
    def place(self, name: str, what: str) -> str | None:
        """Where a tar name lands, as the unpackers clean it: ``..`` stops at the image's root,
        an absolute name is read from the root (recorded in :attr:`confined`); None for the
        root itself."""
        if "\x00" in name:
            raise UnsafePath(f"{name!r}: NUL in a tar entry name")
        path, clamped = confine(name)
        if clamped:
            self.confined.append((name, path))
        return path or None

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

    def links_leaving(self) -> dict[str, tuple[str, str]]:
        """The links that, followed through all the others, leave the mount or never end
        (path -> (target, why)). The runtimes keep
        them (they are only resolved inside the pod, against the container's own files); a later
        layer can turn a harmless link into one (``d/b -> a/../..``, then ``d/a -> ..``)."""
        links = {e.path: e.target for e in self.entries.values() if e.type == "symlink" and e.target}
        out = {}
        for path in sorted(links, key=str.encode):
            try:
                check_link(path, links[path], links.get)
            except UnsafePath as e:
                out[path] = (links[path], str(e))
        return out

    # -- mutations ---------------------------------------------------------------------------
    def begin_layer(self) -> None:
        self._layer = set()
        self._fresh = set()

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

    def opaque(self, marker: str) -> None:
        """Hide what lower layers put in the directory of the opaque ``marker``; this layer's
        entries stay. A link on the way to the marker, or as its directory, is refused."""
        directory = posixpath.dirname(marker)
        if directory:
            no_link_on_the_way(marker, self._is_link, what="opaque whiteout")
            if self._is_link(directory):
                raise UnsafePath(f"opaque whiteout in {directory}, which is a symlink")
        for p in sorted(self._children(directory) if directory else list(self.entries), reverse=True):
            if p in self.entries and p not in self._layer and not any(
                q.startswith(p + "/") for q in self._layer
            ):
                self.remove(p)

    def _parents(self, path: str) -> str:
        """Make the parents of ``path`` directories as the unpackers do on overlayfs and return
        where ``path`` lands. Missing parents are created (0755, root). A symlink of this layer
        is followed as the unpackers follow it, scoped to the image: an absolute target starts
        again at its root, ``..`` stops there (containers/storage must find the directory in
        this layer; containerd creates what is missing). A symlink of an earlier layer becomes a
        directory (the layer's own directory hides it): containerd gives it the mode and owner
        of the directory the link led to, containers/storage 0755 and root. A file in the way
        is refused."""
        *parents, base = path.split("/")
        pending, done = list(parents), []  # type: tuple[list[str], list[str]]
        hops, must_exist = 0, False
        for part in _names(pending, done):
            here = "/".join([*done, part])
            entry = self.entries.get(here)
            if entry is not None and entry.type == "symlink" and here in self._layer:
                hops += 1
                if hops > MAX_LINK_HOPS:
                    raise UnsafePath(f"{path}: more than {MAX_LINK_HOPS} links to follow (a loop?)")
                target = entry.target or ""
                if target.startswith("/"):
                    done.clear()
                # containers/storage creates a missing parent directory only when the parent
                # itself is missing; a link that is the entry's own directory must lead to a
                # directory the layer holds
                must_exist = must_exist or (self.fresh_parents and not pending)
                pending[:0] = target.split("/")
                continue
            if must_exist and here not in self._layer and here not in self._fresh:
                raise UnsafePath(f"{path}: a link of this layer leads to {here}, which the layer itself "
                                 "does not hold: CRI-O (containers/storage) fails to unpack it")
            if entry is not None and entry.type == "symlink":
                mode, uid, gid = self._lower_attributes(here)
                self.remove(here)
                entry = TreeEntry(here, "dir", 0, mode, None, uid, gid)
                self._mkdir(entry)
            elif entry is None:
                entry = TreeEntry(here, "dir", 0, 0o755)
                self._mkdir(entry)
            elif entry.type != "dir":
                raise OcibridgeError(f"{path}: parent {here} is a file, not a directory")
            elif self.fresh_parents and here not in self._layer and here not in self._fresh:
                entry.mode, entry.uid, entry.gid = 0o755, 0, 0
                self._own(here, 0, 0)
            self._fresh.add(here)
            done.append(part)
        return "/".join([*done, base])

    def _lower_attributes(self, link: str) -> tuple[int, int, int]:
        """containerd's mode and owner for a directory replacing ``link``: those of the
        directory the link leads to (scoped to the image), else 0755 and root."""
        if not self.fresh_parents:
            below = self.entries.get(self._scoped(link) or "")
            if below is not None and below.type == "dir":
                return below.mode, below.uid, below.gid
        return 0o755, 0, 0

    def _scoped(self, path: str) -> str | None:
        """Where ``path`` leads through every link of the tree, scoped to the image (an absolute
        target starts again at its root, ``..`` stops there); None for a loop."""
        pending, done = path.split("/"), []  # type: tuple[list[str], list[str]]
        hops = 0
        for part in _names(pending, done):
            target = self.link_at("/".join([*done, part]))
            if target is None:
                done.append(part)
                continue
            hops += 1
            if hops > MAX_LINK_HOPS:
                return None
            if target.startswith("/"):
                done.clear()
            pending[:0] = target.split("/")
        return "/".join(done)

    def _mkdir(self, entry: TreeEntry) -> None:
        self.entries[entry.path] = entry
        if self.root is not None:
            (self.root / entry.path).mkdir(exist_ok=True)
            self._own(entry.path, entry.uid, entry.gid)

    def whiteout(self, path: str) -> None:
        """``path`` names what a ``.wh.`` entry deletes; its parents are made as for any entry."""
        self.remove(self._parents(path))

    def opaque_marker(self, path: str) -> None:
        """``path`` is a ``.wh..wh..opq`` entry: its directory, reached as any entry's parents
        are, loses what lower layers put in it."""
        self.opaque(self._parents(path))

    def _replace(self, path: str, new_type: str) -> None:
        existing = self.entries.get(path)
        if existing is not None and not (existing.type == "dir" and new_type == "dir"):
            self.remove(path)

    def _own(self, path: str, uid: int, gid: int) -> None:
        """Give the disk copy the layer's owner (root can; anybody else is told)."""
        if self.root is None:
            return
        if self._as_root:
            os.lchown(self.root / path, uid, gid)
        elif (uid, gid) != (os.geteuid(), os.getegid()) and not any(
                n.startswith("ownership") for n in self.not_reproduced):
            self.not_reproduced.append(
                "ownership: not running as root, every path is owned by you; the runtime keeps "
                "the layers' uid/gid (k8s check --json lists them)")

    def add_dir(self, path: str, mode: int, uid: int = 0, gid: int = 0) -> None:
        path = self._parents(path)
        self._replace(path, "dir")
        self.entries[path] = TreeEntry(path, "dir", 0, mode & 0o7777, None, uid, gid)
        self._layer.add(path)
        if self.root is not None:
            (self.root / path).mkdir(exist_ok=True)
            self._own(path, uid, gid)

    def add_file(self, path: str, mode: int, size: int, src: Reader | None, uid: int = 0, gid: int = 0) -> None:
        path = self._parents(path)
        self._replace(path, "file")
        self.entries[path] = TreeEntry(path, "file", size, mode & 0o7777, None, uid, gid)
        self._layer.add(path)
        if self.root is not None and src is not None:
            written = 0
            with open(self.root / path, "xb") as out:
                while written < size:
                    data = src.read(min(CHUNK, size - written))
                    if not data:
                        break
                    write_sliced(out, data)
                    written += len(data)
            if written != size:
                raise OcibridgeError(f"{path}: layer ended inside the file")
            self._own(path, uid, gid)  # before chmod: chown clears setuid/setgid
            os.chmod(self.root / path, mode & 0o7777)

    def add_symlink(self, path: str, target: str, uid: int = 0, gid: int = 0) -> None:
        if not target or "\x00" in target:
            raise UnsafePath(f"{path}: empty or NUL-containing link target")
        path = self._parents(path)
        self._replace(path, "symlink")
        self.entries[path] = TreeEntry(path, "symlink", len(target), 0o777, target, uid, gid)
        self._layer.add(path)
        if self.root is not None:
            os.symlink(target, self.root / path)  # kept as written, never followed
            self._own(path, uid, gid)

    def add_special(self, path: str, kind: str, mode: int, uid: int, gid: int, device: str | None) -> None:
        """A FIFO (made on disk too) or a device node, which the runtimes create as root and
        ``k8s mount`` never does: a device node from an untrusted layer on this machine's disk
        would open this machine's device."""
        path = self._parents(path)
        self._replace(path, kind)
        self.entries[path] = TreeEntry(path, kind, 0, mode & 0o7777, device, uid, gid)
        self._layer.add(path)
        if self.root is None:
            return
        if kind == "fifo":
            os.mkfifo(self.root / path)
            self._own(path, uid, gid)
            os.chmod(self.root / path, mode & 0o7777)
        else:
            self.not_reproduced.append(f"device node {path} ({kind} {device}): the runtime creates it, "
                                       "k8s mount does not")

    def add_hardlink(self, path: str, target: str) -> None:
        source = self.entries.get(target)
        if source is None or source.type != "file":
            raise UnsafePath(f"{path}: hard link to {target}, which is not a file in the tree")
        if target not in self._layer:
            raise OcibridgeError(
                f"{path}: hard link to {target} of an earlier layer: on overlayfs every layer is "
                "unpacked on its own, the link finds no file and the runtime fails to unpack")
        if target.startswith(path + "/"):  # found by tests/hostile/test_fuzz.py
            raise UnsafePath(f"{path}: hard link to {target}, inside the directory it would replace")
        path = self._parents(path)
        if target.startswith(path + "/") or target == path:
            raise UnsafePath(f"{path}: hard link to {target}, inside the directory it would replace")
        self._replace(path, "file")
        self.entries[path] = TreeEntry(path, "file", source.size, source.mode, None, source.uid, source.gid)
        self._layer.add(path)
        if self.root is not None:
            os.link(self.root / target, self.root / path)

    def finish(self) -> None:
        """Give directories their final modes, deepest first (kept writable while staging)."""
        if self.root is None:
            return
        for entry in sorted(self.entries.values(), key=lambda e: -e.path.count("/")):
            if entry.type == "dir":
                os.chmod(self.root / entry.path, entry.mode)


def _names(pending: list[str], done: list[str]) -> Iterator[str]:
    """The names of a path being resolved, in turn: empty and ``.`` ones skipped, ``..`` taking
    one back from ``done`` (never above the image's root). The caller may put a link's target
    in front of ``pending`` and clear ``done`` (an absolute target) as it goes."""
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        yield part


def apply_layer(store: Store, desc: Descriptor, tree: Tree) -> str:
    """Apply one tar layer to ``tree``; return its diff_id (sha256 of the uncompressed tar)."""
    tree.begin_layer()
    decoding = TAR_LAYER_TYPES.get(desc.mediaType)  # as the runtimes decode
    with readable_layer(desc), open_layer(store, desc, decoding) as stream:
        hashing = HashingReader(stream)
        with open_tar_stream(hashing) as tar:
            for member in tar_members(tar):
                entry = read_entry(member, tree.place)
                if entry is not None:
                    apply_entry(tar, entry, tree)
        while hashing.read(CHUNK):  # to its end: the blob is verified there
            pass
    return hashing.digest


def confine(name: str) -> tuple[str, bool]:
    """Where a name lands under the mount path as a secure join puts it: ``..`` never climbs
    above the mount, absolute names become relative. Returns (path, whether it was clamped)."""
    parts: list[str] = []
    clamped = name.startswith("/")
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            else:
                clamped = True
            continue
        parts.append(part)
    return "/".join(parts), clamped
