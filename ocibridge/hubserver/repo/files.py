"""A model's files as the Hub lists them: path, size and SHA-256 of each, and the git blob id of
those its commit recorded as regular files (:mod:`.regularfiles`).

A raw layer is one file whose bytes are the blob's: its SHA-256 is the layer digest, known from
the manifest without a byte fetched. A file serve grouped into a tar layer is known from the
commit's record of it (:mod:`.grouped`), and read as a range of that layer. Files of other tar
layers are known only from their contents: the model is materialised through the model cache (a
snapshot, every layer verified) and those files are hashed there, once per model, and served from
that snapshot.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.repo.grouped import ReadsMembers, members
from ocibridge.hubserver.repo.regularfiles import recorded
from ocibridge.model.paths import ArtifactPaths
from ocibridge.oci.digest import sha256_file
from ocibridge.oci.models import Descriptor

if TYPE_CHECKING:
    from ocibridge.cache.modelcache import ModelCache
    from ocibridge.hubserver.repo.catalog import Resolved

#: models whose file lists are kept in memory
MEMO = 256


@dataclass(frozen=True)
class HubFile:
    path: str
    size: int
    sha256: str  # lower-case hex
    layer: Descriptor | None = None  # a raw layer, or a grouped.Member: the file's bytes are this blob's
    local: Path | None = None  # else a verified file of a model cache snapshot
    git_blob: str | None = None  # a regular file's git blob id (its commit recorded it); None: in git-lfs


@dataclass(frozen=True)
class ModelFiles:
    files: dict[str, HubFile]  # by path, sorted

    def directories(self) -> set[str]:
        return directories(self.files)


def directories(paths: Iterable[str]) -> set[str]:
    """Every folder the paths lie in."""
    dirs: set[str] = set()
    for path in paths:
        parts = path.split("/")[:-1]
        dirs.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return dirs


class FileLists:
    """The file list of each model manifest, made once (snapshots for tar layers)."""

    def __init__(self, cache: ModelCache, concurrency: int = 4):
        self.cache = cache
        self.concurrency = concurrency
        self._memo: OrderedDict[str, ModelFiles] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, resolved: Resolved) -> ModelFiles:
        digest = resolved.model.digest
        with self._lock:
            known = self._memo.get(digest)
            if known is not None:
                self._memo.move_to_end(digest)
                return known
        made = self._make(resolved)
        with self._lock:
            self._memo[digest] = made
            while len(self._memo) > MEMO:
                self._memo.popitem(last=False)
        return made

    def _make(self, resolved: Resolved) -> ModelFiles:
        judged = ArtifactPaths(resolved.manifest)  # pull's judgement of the paths (the tar layers': the snapshot's)
        files = {f.path: HubFile(f.path, f.layer.size, f.layer.digest.split(":", 1)[1], layer=f.layer)
                 for f in judged.raw}
        placed = members(resolved.manifest) if isinstance(resolved.repo.store, ReadsMembers) else {}
        files.update((path, HubFile(path, m.size, m.digest.split(":", 1)[1], layer=m))
                     for path, m in placed.items() if path not in files)
        placed_in = {m.within.digest for m in placed.values()}
        if judged.changesets or any(t.digest not in placed_in for t in judged.tars):
            snap = self.cache.snapshot(resolved.repo.store, resolved.model.digest, shown=resolved.model.digest,
                                       concurrency=self.concurrency)
            for path in sorted(snap.path.rglob("*")):
                if path.is_symlink() or not path.is_file():
                    continue  # the Hub has no links; a link's target is listed as itself
                rel = path.relative_to(snap.path).as_posix()
                if rel not in files:
                    files[rel] = HubFile(rel, path.stat().st_size, _sha256(path), local=path)
        regular = recorded(resolved.manifest.annotations)
        return ModelFiles({path: replace(f, git_blob=regular[path]) if path in regular else f
                           for path, f in sorted(files.items())})


def _sha256(path: Path) -> str:
    """The file's SHA-256 in hex (what the Hub names an LFS file by)."""
    return sha256_file(path)[0].removeprefix("sha256:")


def read_small(resolved: Resolved, f: HubFile, limit: int = 1024 * 1024) -> bytes | None:
    """A file's bytes when it is small enough to show (verified: the store checks the digest)."""
    if f.size > limit:
        return None
    with contextlib.suppress(OcibridgeError, OSError):
        if f.local is not None:
            return f.local.read_bytes()[:limit]
        if f.layer is not None:
            return resolved.repo.store.fetch_bytes(f.layer)
    return None


class Resolver(Protocol):
    """How the routes resolve a repo id and revision: the app's (``ServeApp.model``), the one
    resolution the read and the Xet routes make."""

    def __call__(self, repo_id: str, revision: str | None, *,
                 reuse_for: float = 0) -> Awaitable[tuple[Resolved, ModelFiles]]: ...
