"""``k8s mount``: lay out a directory exactly as the runtime would present the volume.

CRI-O and an artifact: one file per named layer (the raw blob, mode 0644, tar layers not
unpacked; the last of duplicate names wins). An image (CRI-O or containerd): its tar layers
applied in order with whiteouts, modes with their special bits and (as root) owners kept, links
kept as written. Everything is staged in a temporary directory beside DIR, every blob is read
to its end through the store's verifying reader, then DIR appears at once.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ocibridge.core import boundedjson
from ocibridge.core.fsutil import TEMP_PREFIX
from ocibridge.errors import OcibridgeError
from ocibridge.k8s.check import CRIO_BLOB_MODE, check
from ocibridge.k8s.runtime import DEFAULT_PLATFORM, Runtime, RuntimeVersion, Selection, crio_name, select
from ocibridge.layers.apply import Tree, apply_layer, confine
from ocibridge.oci.models import Descriptor, ImageConfig
from ocibridge.stores.base import Store


@dataclass
class MountResult:
    """The paths laid out, and what the copy on disk could not reproduce (ownership as non-root)."""

    paths: list[str]
    not_reproduced: list[str] = field(default_factory=list)


def mount(
    store: Store,
    reference: str,
    dest: str | os.PathLike[str],
    runtime: str | Runtime | RuntimeVersion,
    *,
    platform: str = DEFAULT_PLATFORM,
) -> MountResult:
    """Create ``dest`` (absent or empty) holding the volume."""
    rv = RuntimeVersion.parse(runtime)
    out = Path(dest)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise OcibridgeError(f"{out} exists and is not an empty directory")
    digest = store.resolve(reference).digest  # once: what is checked is what is laid out
    result = check(store, digest, rv, platform=platform, read_layers=False)
    if result.reasons:
        raise OcibridgeError(f"{rv.label} would not mount {reference}: {result.reasons[0]}")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=out.parent))
    try:
        tree = Tree(staging, fresh_parents=rv.runtime is Runtime.CRIO)
        sel = select(store, digest, platform)
        if result.kind == "artifact":
            _artifact(store, sel.manifest.layers, tree, rv)
        else:
            _image(store, sel, tree)
        tree.finish()
        os.chmod(staging, 0o755)
        if out.exists():
            out.rmdir()
        os.rename(staging, out)
    finally:
        _remove(staging)
    return MountResult([e.path for e in tree.sorted()], tree.not_reproduced)


def _remove(staging: Path) -> None:
    """Remove a staging tree left by a failure, read-only directories included."""
    if not staging.exists():
        return
    for dirpath, _, _ in os.walk(staging):
        if not os.path.islink(dirpath):
            os.chmod(dirpath, 0o700)
    shutil.rmtree(staging, ignore_errors=True)


def _artifact(store: Store, layers: list[Descriptor], tree: Tree, rv: RuntimeVersion) -> None:
    winners: dict[str, Descriptor] = {}
    for layer in layers:
        name = crio_name(layer, rv)
        if name is not None:
            winners[confine(name)[0]] = layer
    for path, layer in winners.items():
        with store.open_blob(layer) as reader:
            tree.add_file(path, CRIO_BLOB_MODE, layer.size, reader)
            if reader.read(1):
                raise OcibridgeError(f"{path}: blob is longer than its descriptor says")


def _image(store: Store, sel: Selection, tree: Tree) -> None:
    config = ImageConfig.model_validate(boundedjson.loads(store.fetch_bytes(sel.manifest.config)))
    for i, layer in enumerate(sel.manifest.layers):
        diff_id = apply_layer(store, layer, tree)
        if diff_id != config.rootfs.diff_ids[i]:
            raise OcibridgeError(
                f"layer {i} diff_id is {diff_id}, the config says {config.rootfs.diff_ids[i]}"
            )
