"""What a mount shows, made before it is mounted: the raw files as they are, lazily; the tar
layers unpacked by pull's own code (``model.extract``) into a scratch directory, since a tar
layer has no byte ranges per file. The scratch directory is locked while its mount lives, so a mount
killed outright (``kill -9``) leaves one that the next mount on the machine, or the unmount of the
dead mount, removes (:func:`remove_dead_scratch`). The tar layers' blobs
are read through the model's store, which keeps them in the model cache: a second mount unpacks
them again but fetches nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ocibridge.core.stale import MOUNT_SCRATCH_PREFIX, locked_directory, remove_stale_directories
from ocibridge.lazymount.tree import MountTree
from ocibridge.lazyread.model import RemoteModel
from ocibridge.model.extract import extract
from ocibridge.oci.layerinfo import layer_mode


def remove_dead_scratch() -> int:
    """Remove the scratch directories of mounts whose process died (none holds its lock); how many."""
    return remove_stale_directories(Path(tempfile.gettempdir()), MOUNT_SCRATCH_PREFIX)


class Scratch:
    """The scratch directory of one mount's unpacked tar layers (none until one is needed)."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self._lock: int | None = None

    def make(self) -> Path:
        """A new folder to unpack into, inside a scratch directory held locked (the folder is not
        the locked one: unpacking takes its own lock on the folder it writes); the scratch
        directories of mounts that died are removed first."""
        remove_dead_scratch()
        self.path, self._lock = locked_directory(None, MOUNT_SCRATCH_PREFIX)
        unpacked = self.path / "tree"
        unpacked.mkdir()
        return unpacked

    def remove(self) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def build_tree(model: RemoteModel, scratch: Scratch) -> MountTree:
    """The tree ``pull`` would write for ``model``: every raw layer a lazy file (its mode from
    the layer's metadata), every other layer unpacked as pull unpacks it. The paths are
    judged by pull's own judgement (``model.paths``): the raw ones when the model was opened,
    the tar layers' entries as pull's unpacking reads them, against every raw file (none of
    which it writes): what pull refuses is refused here, before anything is mounted."""
    tree = MountTree()
    for key, file in sorted(model.files.items()):
        tree.add_lazy(key, file.layer.size, layer_mode(file.layer))
    if model.paths.tars or model.paths.changesets:
        root = scratch.make()
        extract(model.store, model.descriptor.digest, root, select=lambda rel: rel not in model.files)
        model.packed_judged()
        tree.add_unpacked(root)
    return tree
