"""The mounted model's tree: every path, what it is, where its bytes come from.

Made once, before the mount, from the manifest's raw files (read lazily, by their layer) and
the tar layers as pull unpacks them (a local directory); never changed after, so the kernel
may cache every answer. Names and checks are pull's: the same relative paths, the same
refusals (a path twice, a file that is also a directory), the same modes (0644, or 0755 for
a file the model marks executable).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ocibridge.errors import OcibridgeError

DIR_MODE = stat.S_IFDIR | 0o755


@dataclass(frozen=True)
class LazyFile:
    """A raw layer of the model, read by byte ranges: ``key`` is its path in the model."""

    key: str
    size: int
    mode: int


@dataclass(frozen=True)
class Node:
    """One path of the mount: its ``st_mode`` and size, and where its bytes are."""

    mode: int
    size: int = 0
    lazy: LazyFile | None = None  # read from the registry, verified
    local: Path | None = None  # unpacked from a tar layer (a file or a link)


class MountTree:
    """Paths (``""`` is the root, no leading ``/``) to nodes, and each directory's names."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {"": Node(DIR_MODE)}
        self.children: dict[str, list[str]] = {"": []}

    def _add(self, rel: str, node: Node) -> None:
        if rel in self.nodes:
            raise OcibridgeError(f"duplicate path in artifact: {rel}")
        parent, _, name = rel.rpartition("/")
        self._directory(parent, rel)
        self.nodes[rel] = node
        self.children[parent].append(name)
        if stat.S_ISDIR(node.mode):
            self.children[rel] = []

    def _directory(self, rel: str, child: str) -> None:
        """``rel`` as a directory (made, with its parents, if it is not there)."""
        node = self.nodes.get(rel)
        if node is None:
            self._add(rel, Node(DIR_MODE))
        elif not stat.S_ISDIR(node.mode):
            raise OcibridgeError(f"the artifact holds {rel} as a file and as a directory ({child})")

    def add_lazy(self, key: str, size: int, mode: int) -> None:
        """A raw file at ``key``, a path judged already (``model.paths``)."""
        self._add(key, Node(stat.S_IFREG | mode, size, lazy=LazyFile(key, size, mode)))

    def add_unpacked(self, root: Path) -> None:
        """Everything under ``root`` (pull's unpacking of the tar layers), by ``lstat``: links
        stay links, as pull writes them."""
        for top, dirs, files in os.walk(root):
            for name in sorted(dirs) + sorted(files):
                path = Path(top) / name
                rel = path.relative_to(root).as_posix()
                st = path.lstat()
                if stat.S_ISDIR(st.st_mode):
                    if rel not in self.nodes:
                        self._add(rel, Node(DIR_MODE))
                    else:
                        self._directory(rel, rel)
                else:
                    self._add(rel, Node(st.st_mode, st.st_size, local=path))

    def node(self, path: str) -> Node:
        """The node at a FUSE path (``/a/b``); ENOENT when there is none."""
        found = self.nodes.get(path.strip("/"))
        if found is None:
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return found

    def names(self, path: str) -> list[str]:
        found = self.children.get(path.strip("/"))
        if found is None:
            raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
        return found

    @property
    def lazy_keys(self) -> set[str]:
        return {node.lazy.key for node in self.nodes.values() if node.lazy is not None}
