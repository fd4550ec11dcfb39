"""ModelCar images built by other tools: an ordinary image whose layers put the model under /models.

KServe's convention is a Dockerfile such as ``FROM busybox`` + ``COPY model /models``: nothing in
the manifest or config marks it, so it is recognised by what its layers hold (:func:`has_models`)
and read by applying its tar layers in order through the confined layer reader of ``k8s mount``
(whiteouts, links resolved inside the tree, bomb limits, diff_ids checked against the config).
Only entries under ``models/`` are kept (and written to disk); the base image's files are
counted and reported as lost, never unpacked.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ocibridge.core import boundedjson
from ocibridge.core.confined import check_links
from ocibridge.core.fsutil import TEMP_PREFIX, is_root_entry, safe_relpath
from ocibridge.core.streams import open_tar_stream
from ocibridge.errors import SourceError, TooLarge, UnsafePath
from ocibridge.kinds.neutral import Loss
from ocibridge.layers.applier import apply_entry, read_entry
from ocibridge.layers.apply import Tree
from ocibridge.layers.reader import open_layer, readable_layer
from ocibridge.layers.tarwalk import tar_members
from ocibridge.oci.digest import CHUNK, HashingReader
from ocibridge.oci.mediatypes import TAR_LAYER_TYPES
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import MAX_MANIFEST_BYTES, Store

ROOT = "models"
#: image config fields a model package has no place for, reported when the image sets them
IMAGE_FIELDS = ("User", "Env", "Entrypoint", "Cmd", "WorkingDir", "Labels", "ExposedPorts", "Volumes",
                "StopSignal", "Healthcheck")


def _under_root(path: str) -> bool:
    return path == ROOT or path.startswith(ROOT + "/")


def _place(name: str, what: str) -> str | None:
    """ModelCar's name rule: a name that is absolute or climbs out of the image is refused, not
    cleaned into it as a runtime would; None for the archive root."""
    if what == "tar entry" and is_root_entry(name):
        return None
    return safe_relpath(name.rstrip("/"), what)


class _ModelsSink:
    """How an image's entries under /models are laid out on the :class:`Tree`: names refused
    (:func:`_place`), a whiteout or opaque marker never reached through a link (the tree refuses
    it), owners not kept (the files become the package's), special files refused."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree

    def place(self, name: str, what: str) -> str | None:
        return _place(name, what)

    def opaque_marker(self, path: str) -> None:
        self.tree.opaque(path)

    def whiteout(self, path: str) -> None:
        self.tree.remove(path)

    def add_dir(self, path: str, mode: int, uid: int, gid: int) -> None:
        self.tree.add_dir(path, mode)

    def add_symlink(self, path: str, target: str, uid: int, gid: int) -> None:
        self.tree.add_symlink(path, target)

    def add_hardlink(self, path: str, target: str) -> None:
        self.tree.add_hardlink(path, target)

    def add_file(self, path: str, mode: int, size: int, src: IO[bytes] | None, uid: int, gid: int) -> None:
        self.tree.add_file(path, mode, size, src)

    def add_special(self, path: str, kind: str, mode: int, uid: int, gid: int, device: str | None) -> None:
        raise UnsafePath(f"{path}: device, fifo or other special file in a layer")


def has_models(store: Store, manifest: Manifest) -> bool:
    """Whether the image's top-most layer that holds files puts them under /models.

    Layers are read from the top down, tar headers only, and the scan stops at the first layer
    that decides: one with a file under ``models/`` (a ModelCar), or one with files elsewhere
    only (an application layer: an ordinary image); directories and deletions decide nothing.
    A plain image costs one layer read.
    """
    for layer in reversed(manifest.layers):
        if layer.mediaType not in TAR_LAYER_TYPES:
            return False
        verdict = _scan(store, layer)
        if verdict is not None:
            return verdict
    return False


def _scan(store: Store, layer: Descriptor) -> bool | None:
    outside = False
    with readable_layer(layer, "image layer"), open_layer(store, layer) as stream, open_tar_stream(stream) as tar:
        for member in tar_members(tar):
            entry = read_entry(member, _place)
            if entry is None or member.isdir():
                continue
            path = entry.affected
            if _under_root(path) and path != ROOT:
                return True
            if not entry.deletion:
                outside = True  # a file elsewhere (a deletion elsewhere, RUN rm -rf /tmp/*, decides nothing)
    return False if outside else None


@dataclass
class ModelsTree:
    """The files under /models of an image, staged on disk (``root`` is the /models directory),
    and what the image held that a model package cannot."""

    staging: Path
    entries: list[tuple[str, str, str | None]]  # (path under /models, 'file'|'symlink', link target)
    losses: list[Loss] = field(default_factory=list)

    @property
    def root(self) -> Path:
        return self.staging / ROOT

    def remove(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)

    def remove_with(self, owner: object) -> None:
        """Remove the staged files once ``owner`` (the store serving them) is collected, or at exit."""
        weakref.finalize(owner, shutil.rmtree, str(self.staging), True)


def read_models(store: Store, manifest: Manifest, config: dict[str, Any]) -> ModelsTree:
    """Apply the image's layers (entries under /models only) in a new staging directory; a clear
    error, and nothing left behind, for anything unsafe or inconsistent."""
    staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
    try:
        return _read(store, manifest, config, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _read(store: Store, manifest: Manifest, config: dict[str, Any], staging: Path) -> ModelsTree:
    diff_ids = (config.get("rootfs") or {}).get("diff_ids") if isinstance(config.get("rootfs"), dict) else None
    if not isinstance(diff_ids, list) or len(diff_ids) != len(manifest.layers):
        raise SourceError(f"image config lists {len(diff_ids) if isinstance(diff_ids, list) else 'no'} "
                          f"diff_ids for {len(manifest.layers)} layers")
    tree = Tree(staging)
    outside = 0
    for i, layer in enumerate(manifest.layers):
        if layer.mediaType not in TAR_LAYER_TYPES:
            raise SourceError(f"image layer {layer.digest} is {layer.mediaType!r}, not a tar layer")
        diff_id, skipped = _apply(store, layer, tree)
        outside += skipped
        if diff_id != diff_ids[i]:
            raise SourceError(f"image layer {i} ({layer.digest}): its diff_id is {diff_id}, "
                              f"the config says {diff_ids[i]}")
    tree.finish()
    top = tree.entries.get(ROOT)
    if top is None or top.type != "dir":
        raise SourceError("the image has no /models directory" if top is None
                          else "/models in the image is not a directory")
    prefix = ROOT + "/"
    entries: list[tuple[str, str, str | None]] = []
    links: dict[str, str] = {}
    for entry in tree.sorted():
        if not entry.path.startswith(prefix) or entry.type == "dir":
            continue
        rel = entry.path[len(prefix):]
        entries.append((rel, entry.type, entry.target))
        if entry.type == "symlink" and entry.target is not None:
            links[rel] = entry.target
    try:  # a link inside /models may not lead to the base image's files either
        check_links(links)
    except UnsafePath as e:
        raise UnsafePath(f"/models: {e}") from None
    if not entries:
        raise SourceError("the image's /models directory holds no files")
    losses = []
    if outside:
        losses.append(Loss("image.base", f"{outside} entries outside /models (base image layers)", False))
    losses += _config_losses(config)
    annotations = sorted((manifest.annotations or {}).items())
    losses += [Loss(f"image.annotations[{k}]", _short(v), False) for k, v in annotations]
    return ModelsTree(staging, entries, losses)


def _apply(store: Store, layer: Descriptor, tree: Tree) -> tuple[str, int]:
    """Apply the entries of one layer that touch /models; (the layer's diff_id, entries skipped)."""
    tree.begin_layer()
    sink = _ModelsSink(tree)
    skipped = 0
    with readable_layer(layer, "image layer"), open_layer(store, layer) as stream:  # bounded, verified at its end
        hashing = HashingReader(stream)
        with open_tar_stream(hashing) as tar:
            for member in tar_members(tar):
                entry = read_entry(member, _place)
                if entry is None:
                    continue
                path = entry.affected
                if path and not _under_root(path):  # '' is an opaque marker at the root
                    skipped += 0 if member.isdir() or entry.deletion else 1
                    continue
                # a whiteout of /models itself (.wh.models) may be recreated by a later layer
                if path == ROOT and not member.isdir() and not entry.deletion:
                    raise UnsafePath(f"/models in layer {layer.digest} is not a directory")
                apply_entry(tar, entry, sink)
        while hashing.read(CHUNK):  # to the end, where the blob's digest is checked
            pass
    return hashing.digest, skipped


def _config_losses(config: dict[str, Any]) -> list[Loss]:
    runtime = config.get("config")
    if not isinstance(runtime, dict):
        return []
    return [Loss(f"image.config.{k}", _short(runtime[k]), False)
            for k in IMAGE_FIELDS if runtime.get(k) not in (None, "", [], {})]


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def image_config(store: Store, manifest: Manifest) -> dict[str, Any]:
    """The image config as a JSON object (bounded, clear errors)."""
    if manifest.config.size > MAX_MANIFEST_BYTES:
        raise TooLarge(f"image config {manifest.config.digest} is too large ({manifest.config.size} bytes)")
    try:
        doc = boundedjson.loads(store.fetch_bytes(manifest.config))
    except boundedjson.JsonTooDeep as e:
        raise SourceError(f"image config {manifest.config.digest} is nested too deeply to read ({e})") from None
    except ValueError as e:
        raise SourceError(f"image config {manifest.config.digest} is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise SourceError(f"image config {manifest.config.digest} is not a JSON object")
    return doc
