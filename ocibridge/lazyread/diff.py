"""What changed between two models: files by layer digest, config fields, and the tensors of a
changed safetensors file, read lazily (``ocibridge diff``; ``kit diff`` stops at layers).

A tensor is the same on both sides when the chunks covering it carry the same digests (a chunk
table on both sides, the tensor at the same offset): nothing of it is read. Otherwise only its
bytes are read on both sides (verified, the chunks that cover it where a table allows, else the
whole blob) and compared. Files are named by their layer's path annotation; a tar layer is one
entry (its directory), compared by digest.

Files (by digest and size) need no reads and are always there. With a read budget
(:class:`ReadBudget`: serve's pages), the configs and then the tensors are read only while the
budget lasts: a file whose tensors could not all be compared says so (:attr:`FileChange.unread`),
as does one whose safetensors header is malformed, instead of the whole diff failing.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ocibridge.core import boundedjson
from ocibridge.core.asdict import FieldsAsDict
from ocibridge.lazyread.blobreader import VerifiedBlob
from ocibridge.lazyread.budget import OverBudget, ReadBudget
from ocibridge.lazyread.model import RemoteModel
from ocibridge.lazyread.rangeless import LazySource
from ocibridge.lazyread.safetensors import RemoteSafetensors, SafetensorsError
from ocibridge.lazyread.tensorfile import TensorInfo
from ocibridge.oci.layerinfo import is_raw, layer_path
from ocibridge.oci.models import Descriptor

#: a config larger than this is compared by digest only
MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: config fields that list the layers' digests (ModelPack's ``modelfs.diffIds``, an image's
#: ``rootfs.diff_ids``): they change exactly when a file does, which the files say by name, so
#: they are no config change of their own (a wall of hashes repeating the files)
LAYER_LISTS = frozenset({"modelfs.diffIds", "rootfs.diff_ids"})


@dataclass(frozen=True, slots=True)  # slots: a diff may hold 200,000 of them
class TensorChange:
    """A tensor ``added``, ``removed`` or ``changed`` (its dtype, shape or bytes); ``how`` the
    change was found: ``header`` (dtype or shape), ``bytes`` (its bytes read and compared)."""

    name: str
    change: str
    how: str
    old: str | None = None  # "F32[2, 3]"
    new: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "change": self.change, "how": self.how, "old": self.old, "new": self.new}

    def reversed(self) -> TensorChange:
        flipped = {"added": "removed", "removed": "added"}.get(self.change, self.change)
        return TensorChange(self.name, flipped, self.how, self.new, self.old)


@dataclass(frozen=True)
class FileChange:
    """A file ``added``, ``removed`` or ``changed`` (another layer digest); ``tensors``: for a
    changed safetensors file, what changed in it (None: not looked into); ``same_by_chunks``:
    tensors found unchanged by their chunk digests alone, nothing of them read; ``unread``: what
    of its tensors was not compared, and why (the read budget, a malformed header), else None."""

    path: str
    change: str
    old: Descriptor | None
    new: Descriptor | None
    tensors: tuple[TensorChange, ...] | None = None
    same_by_chunks: int = 0
    unread: str | None = None

    def reversed(self) -> FileChange:
        flipped = {"added": "removed", "removed": "added"}.get(self.change, self.change)
        tensors = None if self.tensors is None else tuple(t.reversed() for t in self.tensors)
        return FileChange(self.path, flipped, self.new, self.old, tensors, self.same_by_chunks, self.unread)

    def as_dict(self) -> dict[str, Any]:
        def side(d: Descriptor | None) -> dict[str, Any] | None:
            return None if d is None else {"digest": d.digest, "size": d.size}

        return {"path": self.path, "change": self.change, "old": side(self.old), "new": side(self.new),
                "tensors": None if self.tensors is None else [t.as_dict() for t in self.tensors],
                "sameByChunks": self.same_by_chunks, "notCompared": self.unread}


@dataclass(frozen=True)
class ConfigChange(FieldsAsDict):
    """A config field (dotted path) whose JSON value differs; None on a side: absent there."""

    field: str
    old: Any
    new: Any

    def reversed(self) -> ConfigChange:
        return ConfigChange(self.field, self.new, self.old)


@dataclass(frozen=True)
class ModelDiff:
    """Two models compared: the files and config fields that differ (unchanged ones left out)
    and the bytes read from the registry to tell configs and tensors apart; ``budget``: the cap
    those reads were made under (None: none)."""

    old_reference: str
    new_reference: str
    old_digest: str
    new_digest: str
    files: tuple[FileChange, ...]
    config: tuple[ConfigChange, ...]
    bytes_read: int = 0
    budget: int | None = None

    @property
    def same(self) -> bool:
        return not self.files and not self.config

    @property
    def complete(self) -> bool:
        """Whether every changed safetensors file had its tensors compared."""
        return all(f.unread is None for f in self.files)

    def reversed(self) -> ModelDiff:
        """The same comparison the other way round (``new`` to ``old``), nothing read again."""
        return ModelDiff(self.new_reference, self.old_reference, self.new_digest, self.old_digest,
                         tuple(f.reversed() for f in self.files), tuple(c.reversed() for c in self.config),
                         self.bytes_read, self.budget)

    def as_dict(self) -> dict[str, Any]:
        return {"old": {"reference": self.old_reference, "digest": self.old_digest},
                "new": {"reference": self.new_reference, "digest": self.new_digest},
                "files": [f.as_dict() for f in self.files], "config": [c.as_dict() for c in self.config],
                "bytesRead": self.bytes_read, "readBudget": self.budget, "same": self.same,
                "complete": self.complete}


def diff_models(old: RemoteModel, new: RemoteModel, old_ref: str, new_ref: str,
                budget: ReadBudget | None = None) -> ModelDiff:
    """Compare two opened models (see the module's docstring); ``budget``: what the configs'
    and tensors' reads may take together (None: no cap)."""
    files: list[FileChange] = []
    opened: list[VerifiedBlob] = []
    config_read = [0]
    try:
        config = tuple(_config_changes(old, new, budget, config_read))
        for change in changed_files(old.manifest.layers, new.manifest.layers):
            a, b = change.old, change.new
            if a is not None and b is not None and change.path.endswith(".safetensors") and is_raw(a) and is_raw(b):
                files.append(_tensor_changes(old, new, change, opened, budget))
            else:
                files.append(change)
    finally:
        for blob in opened:
            blob.close()
    read = config_read[0] + sum(blob.bytes_fetched for blob in opened)
    return ModelDiff(old_ref, new_ref, old.descriptor.digest, new.descriptor.digest, tuple(files), config, read,
                     None if budget is None else budget.limit)


def changed_files(old: Sequence[Descriptor], new: Sequence[Descriptor]) -> list[FileChange]:
    """The files added, removed and changed (another layer digest) from the layers ``old`` to
    ``new``, by their path annotations, sorted by path: what every diff starts from, with
    nothing read (the tensors of a changed file not looked into; serve's commit page shows this)."""
    old_files, new_files = _paths(old), _paths(new)
    files: list[FileChange] = []
    for path in sorted(old_files.keys() | new_files.keys()):
        a, b = old_files.get(path), new_files.get(path)
        if a is not None and b is not None and a.digest == b.digest:
            continue
        change = "added" if a is None else "removed" if b is None else "changed"
        files.append(FileChange(path, change, a, b))
    return files


def _paths(layers: Sequence[Descriptor]) -> dict[str, Descriptor]:
    found: dict[str, Descriptor] = {}
    for layer in layers:
        path = layer_path(layer)
        if path:
            found[path.strip("/")] = layer
    return found


def _shown(info: TensorInfo) -> str:
    return _shape_text(info.dtype, info.shape)


@functools.lru_cache(maxsize=4096)
def _shape_text(dtype: str, shape: tuple[int, ...]) -> str:
    """One string for each dtype and shape, shared by every tensor that has them (a diff of
    200,000 tensors of a few shapes holds a few strings, not 400,000)."""
    return f"{dtype}{list(shape)}"


def _blob(model: RemoteModel, path: str, budget: ReadBudget | None) -> VerifiedBlob:
    """A reader of one file that reads only what is asked (no read-ahead: a diff knows where its
    reads end), by the model's trusted chunk table where it covers the file; the model's
    ``warn`` is told before a large file is read whole (as its own readers tell it)."""
    entry = model.file(path)
    table = model.chain.table
    chunks = table.for_layer(entry.layer) if table is not None else None
    return VerifiedBlob(model.store, entry.layer, chunks, table.chunk_size if table is not None else 0,
                        read_ahead=False, on_fallback=model.fallback_notice(entry), budget=budget)


def _tensor_changes(old: RemoteModel, new: RemoteModel, file: FileChange, opened: list[VerifiedBlob],
                    budget: ReadBudget | None) -> FileChange:
    """``file`` with what changed in its tensors, as far as the budget and its headers allow."""
    path = file.path
    a_blob, b_blob = _blob(old, path, budget), _blob(new, path, budget)
    opened.extend((a_blob, b_blob))
    try:
        a, b = RemoteSafetensors(a_blob, path), RemoteSafetensors(b_blob, path)
    except OverBudget:
        return replace(file, unread=f"no tensor compared: reading the headers would pass the read budget "
                                    f"({_budget_text(budget)})")
    except SafetensorsError as e:
        return replace(file, unread=f"no tensor compared: {e}")
    changes: list[TensorChange] = []
    same_by_chunks = 0
    names = sorted(a.tensors.keys() | b.tensors.keys())
    for done, name in enumerate(names):
        x, y = a.tensors.get(name), b.tensors.get(name)
        if x is None or y is None:
            changes.append(TensorChange(name, "added" if x is None else "removed", "header",
                                        None if x is None else _shown(x), None if y is None else _shown(y)))
        elif (x.dtype, x.shape) != (y.dtype, y.shape):
            changes.append(TensorChange(name, "changed", "header", _shown(x), _shown(y)))
        elif _same_chunks(a_blob, b_blob, x, y):
            same_by_chunks += 1
        else:
            try:
                differs = _digest(a_blob, x) != _digest(b_blob, y)
            except OverBudget:
                return replace(file, tensors=tuple(changes), same_by_chunks=same_by_chunks,
                               unread=f"{len(names) - done} of {len(names)} tensors not compared: their bytes "
                                      f"would pass the read budget ({_budget_text(budget)})")
            if differs:
                changes.append(TensorChange(name, "changed", "bytes", _shown(x), _shown(y)))
    return replace(file, tensors=tuple(changes), same_by_chunks=same_by_chunks)


def _budget_text(budget: ReadBudget | None) -> str:
    return "none" if budget is None else f"{budget.limit} bytes, {budget.taken} taken"


def _same_chunks(a: VerifiedBlob, b: VerifiedBlob, x: TensorInfo, y: TensorInfo) -> bool:
    """Whether the chunks covering the tensor carry the same digests on both sides (both tables
    of one chunk size and one hash, the tensor at the same offset): then its bytes are the same,
    unread. Tables of two hashes say nothing of each other: the tensor is read."""
    if a.chunks is None or b.chunks is None or a.chunk_size != b.chunk_size or a.chunk_size <= 0:
        return False
    if a.chunks.algorithm != b.chunks.algorithm:
        return False
    if (x.start, x.end) != (y.start, y.end):
        return False
    if x.start == x.end:
        return True
    first, last = x.start // a.chunk_size, (x.end - 1) // a.chunk_size
    span = slice(first, last + 1)
    return a.chunks.chunks[span] == b.chunks.chunks[span]


def _digest(blob: VerifiedBlob, info: TensorInfo) -> str:
    return hashlib.sha256(blob.read(info.start, info.end)).hexdigest()


def _config_changes(old: RemoteModel, new: RemoteModel, budget: ReadBudget | None,
                    read: list[int]) -> Iterator[ConfigChange]:
    a_desc, b_desc = old.manifest.config, new.manifest.config
    if a_desc.digest == b_desc.digest:
        return
    a, b = _config(old.store, a_desc, budget, read), _config(new.store, b_desc, budget, read)
    if a is None or b is None:
        yield ConfigChange("(config)", a_desc.digest, b_desc.digest)
        return
    flat_a, flat_b = dict(_flatten(a)), dict(_flatten(b))
    for key in sorted((flat_a.keys() | flat_b.keys()) - LAYER_LISTS):
        if flat_a.get(key, _ABSENT) != flat_b.get(key, _ABSENT):
            yield ConfigChange(key, flat_a.get(key), flat_b.get(key))


_ABSENT = object()


def _config(store: LazySource, desc: Descriptor, budget: ReadBudget | None, read: list[int]) -> Any:
    """The config as JSON, or None when it is too large for the cap or the budget, or not JSON
    (compared by digest then); ``read[0]`` counts what was fetched."""
    if desc.size > MAX_CONFIG_BYTES:
        return None
    try:
        if budget is not None:
            budget.take(desc.size, f"config {desc.digest}")
        data = store.fetch_bytes(desc)
        read[0] += len(data)
        return boundedjson.loads(data)
    except (ValueError, UnicodeDecodeError, OverBudget):
        return None


def _flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Leaves of a JSON document by dotted path; a list is one leaf (a reordering is a change)."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _flatten(item, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix or "(config)", value


__all__ = ["ConfigChange", "FileChange", "ModelDiff", "TensorChange", "diff_models"]
