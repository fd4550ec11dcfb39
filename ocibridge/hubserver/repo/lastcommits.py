"""Which commit last changed each file and folder of a branch: the Hub's ``lastCommit``, which
``expand=true`` asks of the tree and paths-info routes (``RepoFile.last_commit``, and through it
``HfFileSystem.modified``).

The walk is the history's (:mod:`ocibridge.hubserver.repo.history`: each manifest names its parent's digest), from
the head, at most :data:`.history.COMMITS_MAX` commits: each commit's files are compared with its
parent's, and the newest commit where a path's content differs is the one that changed it. A path
no commit of the walk changed is named by the oldest commit reached (the one that added it, or a
manifest pushed outside serve, which names no parent).

A commit's files come from its manifest alone, read once and kept by digest (a manifest never
changes): a raw layer is its file, named by its digest. Files inside tar layers are known only
from a snapshot; in the walk they stand for their manifest's tar layers, so such a file counts
as changed whenever any tar layer of the commit did (a listing unpacks no tar). A folder changed
when anything under it did.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ocibridge.core.fsutil import safe_relpath
from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.repo.history import COMMITS_MAX, annotations_of, commit_entry, parent_of, read_manifest
from ocibridge.oci.empty import is_empty_layer
from ocibridge.oci.layerinfo import raw_file_path
from ocibridge.oci.models import Descriptor

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.catalog import Resolved
    from ocibridge.hubserver.repo.files import ModelFiles
    from ocibridge.stores.base import ReadableStore

#: commits whose files are kept, by manifest digest
STEPS_KEPT = 1024
#: heads whose answers are kept (a listing pages through one head: each page asks again)
HEADS_KEPT = 64

#: what the Hub calls a commit in a ``lastCommit``: id, title, date
Commit = dict[str, str]


@dataclass(frozen=True)
class Step:
    """One commit of the walk: what it says of itself and what it holds."""

    digest: str
    notes: dict[str, Any]
    files: dict[str, str]  # raw layers: path -> layer digest
    tars: str  # its tar layers' digests, joined ("" when none): what a file inside one is

    def state(self, path: str) -> str | None:
        """What ``path`` holds in this commit (None: nothing known)."""
        return self.files.get(path) or (f"tar {self.tars}" if self.tars else None)

    def folders(self, wanted: set[str]) -> dict[str, str]:
        """A digest of what each folder of ``wanted`` holds in this commit."""
        held: dict[str, list[str]] = {d: [self.tars] for d in wanted}
        for path, digest in sorted(self.files.items()):
            parts = path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                folder = "/".join(parts[:i])
                if folder in held:
                    held[folder].append(f"{path} {digest}")
        return {d: hashlib.sha256("\n".join(lines).encode()).hexdigest() for d, lines in held.items()}


class LastCommits:
    """The last commit of every path of a head, walked once per head and kept."""

    def __init__(self) -> None:
        self._steps: OrderedDict[str, Step | None] = OrderedDict()
        self._answers: OrderedDict[str, dict[str, Commit]] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, head: Resolved, files: ModelFiles) -> Mapping[str, Commit]:
        """path -> the commit that last changed it, for every file and folder of ``files``
        (the head's)."""
        with self._lock:
            known = self._answers.get(head.top.digest)
            if known is not None:
                self._answers.move_to_end(head.top.digest)
                return known
        made = self._walk(head, files)
        with self._lock:
            _keep(self._answers, head.top.digest, made, HEADS_KEPT)
        return made

    def _walk(self, head: Resolved, files: ModelFiles) -> dict[str, Commit]:
        store = head.repo.store
        current = self._step(store, head.top.digest, head)
        if current is None:
            return {}
        found: dict[str, Commit] = {}
        waiting = set(files.files)
        folders = files.directories()
        seen = {current.digest}
        current_folders = current.folders(folders)
        for _ in range(COMMITS_MAX - 1):
            if not waiting and not folders:
                break
            digest = parent_of(current.notes)
            parent = self._step(store, digest) if digest is not None and digest not in seen else None
            if parent is None:
                break
            seen.add(parent.digest)
            named = commit_entry(current.digest, current.notes, head)
            changed = {p for p in waiting if current.state(p) != parent.state(p)}
            parent_folders = parent.folders(folders)
            changed_folders = {d for d in folders if current_folders[d] != parent_folders[d]}
            found.update(dict.fromkeys(changed | changed_folders, named))
            waiting -= changed
            folders -= changed_folders
            current, current_folders = parent, {d: parent_folders[d] for d in folders}
        oldest = commit_entry(current.digest, current.notes, head)
        found.update(dict.fromkeys(waiting | folders, oldest))
        return found

    def _step(self, store: ReadableStore, digest: str, head: Resolved | None = None) -> Step | None:
        """The commit ``digest`` as a :class:`Step` (its manifest read once, then kept); None
        when the store no longer holds it, or it lists no layers (an index: the head's are
        its model manifest's)."""
        with self._lock:
            if digest in self._steps:
                self._steps.move_to_end(digest)
                return self._steps[digest]
        doc = read_manifest(store, digest)
        layers: Iterable[Any] | None = doc.get("layers") if doc is not None else None
        if doc is not None and not isinstance(layers, list) and head is not None:
            layers = list(head.manifest.layers)
        step = None if doc is None or not isinstance(layers, list) else _step_of(digest, doc, layers)
        with self._lock:
            _keep(self._steps, digest, step, STEPS_KEPT)
        return step


def _step_of(digest: str, doc: dict[str, Any], layers: list[Any]) -> Step:
    files: dict[str, str] = {}
    tars: list[str] = []
    for raw in layers:
        try:  # a Descriptor (the head's model manifest) or its JSON (a manifest read)
            layer = Descriptor.model_validate(raw)
            if is_empty_layer(layer):
                continue  # a commit of no files (oci/empty.py)
            path = raw_file_path(layer)
            if path is not None:
                files[safe_relpath(path, "layer file path")] = layer.digest  # as FileLists names it
            else:
                tars.append(layer.digest)
        except OcibridgeError:  # a layer no file list takes: what it holds is unknown, as a tar's
            tars.append(str(raw.get("digest")) if isinstance(raw, dict) else "?")
    return Step(digest, annotations_of(doc), files, " ".join(tars))


def _keep(memo: OrderedDict[str, Any], key: str, value: Any, most: int) -> None:
    memo[key] = value
    memo.move_to_end(key)
    while len(memo) > most:
        memo.popitem(last=False)
