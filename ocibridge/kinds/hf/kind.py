"""``hf:ORG/NAME[@REVISION]`` in the table of kinds: a model of the local Hugging Face cache
(``hf:datasets/ORG/NAME[@REVISION]``: a dataset of it, its files layers of the dataset kind, its
card a doc, the repository type annotation on its manifest: kinds/hf/repotype.py).

Pushed, the snapshot's files are read where the cache keeps them (no network), and the
artifact says where they came from with the standard annotations (``image.source``: the Hub
page; ``image.revision``: the commit). Pulled, the artifact is resolved through the model
cache and laid out as the Hub cache, so code that loads by repo id finds it offline.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ocibridge.errors import SourceError
from ocibridge.kinds.hf.hubcache import COMMIT, SHARED_ENTRY, repo_folder, resolve_revision, shared_blobs
from ocibridge.kinds.hf.locator import HubReference, parse_hub_reference
from ocibridge.kinds.source import ExportRequest, ReadRequest

if TYPE_CHECKING:
    from ocibridge.cache.modelcache import ModelCache, Snapshot
    from ocibridge.model.package import ModelFile, ModelPackage
    from ocibridge.oci.mediatypes import Kind
    from ocibridge.oci.models import Descriptor
    from ocibridge.stores.base import Store
    from ocibridge.transfer.pull_result import PullResult

SOURCE_ANNOTATION = "org.opencontainers.image.source"
REVISION_ANNOTATION = "org.opencontainers.image.revision"


def read_snapshot(ref: HubReference, request: ReadRequest, keep: Callable[[str], bool] | None = None,
                  root: Path | None = None, *, gitattributes: bool = False) -> ModelPackage:
    """The files of a Hub cache snapshot, each read from the blob its symlink names: a file of
    the repo's folder, or of the cache's shared store of Xet files (huggingface_hub 2.x); a link
    leaving both is refused. Every file is hashed as it is read, whatever its name says. Only
    those ``keep`` keeps, when given (a mirror job's include/exclude: the snapshot may hold
    more, downloaded by another). ``root``: the Hub cache to read (default: huggingface_hub's own).
    ``gitattributes``: ``.gitattributes`` kept as a file (serve's proxy: a file of the Hub's commit);
    ``push hf:`` leaves it out, a tool file rather than the model's."""
    from ocibridge.model.package import ModelPackage

    reference, repo_id, revision = ref.text, ref.repo_id, ref.revision
    folder = repo_folder(repo_id, root, ref.repo_type)
    commit = resolve_revision(folder, ref.typed_id, revision)
    kind_of = _kinds(ref, request)
    snapshot = folder / "snapshots" / commit
    if not snapshot.is_dir():
        raise SourceError(f"{reference}: snapshot {commit} is missing from {folder}")
    inside = os.path.realpath(folder) + os.sep
    shared = os.path.realpath(shared_blobs(folder)) + os.sep
    files: list[ModelFile] = []
    for path in sorted(snapshot.rglob("*"), key=lambda p: p.as_posix().encode()):
        if path.is_dir() and not path.is_symlink():
            continue
        rel = path.relative_to(snapshot).as_posix()
        if (not gitattributes and (rel == ".gitattributes" or rel.startswith(".gitattributes/"))) or \
                any(_glob(rel, p) for p in request.excludes) or (keep is not None and not keep(rel)):
            continue
        real = os.path.realpath(path)
        if not (real.startswith(inside) or _in_shared_store(real, shared)) or not _regular(real):
            raise SourceError(f"{reference}: {rel} does not lead to a file of the cache ({real})")
        files.append(_file(rel, Path(real), kind_of(rel, os.path.getsize(real))))
    if not files:
        raise SourceError(f"{reference}: the snapshot {commit} holds no files")
    package = ModelPackage(files=files, descriptor={"name": request.name or repo_id.rsplit("/", 1)[-1]},
                           source_format="hf")
    _fill(ref, package)
    package.annotations[SOURCE_ANNOTATION] = f"https://huggingface.co/{ref.typed_id}"
    package.annotations[REVISION_ANNOTATION] = commit
    return package


def _kinds(ref: HubReference, request: ReadRequest) -> Callable[[str, int], Kind]:
    """How a file's kind is chosen: by its name for a model, the dataset kind (its card a doc)
    for a dataset; ``--kind`` overrides win either way."""
    from ocibridge.kinds.hf.datasetpackage import dataset_kind
    from ocibridge.model.classify import classify

    overrides = request.kind_overrides
    if ref.is_dataset:
        return lambda rel, size: dataset_kind(rel, size, overrides)
    return lambda rel, size: classify(rel, size, overrides)


def _fill(ref: HubReference, package: ModelPackage) -> None:
    """The metadata a model's files and card say; a dataset's card's, and its repository type."""
    if ref.is_dataset:
        from ocibridge.kinds.hf.datasetpackage import mark_dataset

        mark_dataset(package)
        return
    from ocibridge.model import metadata

    metadata.fill(package)


def _in_shared_store(real: str, shared: str) -> bool:
    """``real`` is an entry of huggingface_hub 2.x's cache-wide store of Xet files
    (``<cache>/blobs/<2 hex>/<xet hash>``, which a repository's ``blobs/<etag>`` links to): by
    its shape, so a link to the store's marker or manifests, or anywhere else, stays refused."""
    if not real.startswith(shared):
        return False
    return SHARED_ENTRY.fullmatch(real[len(shared):]) is not None


def _regular(real: str) -> bool:
    """A regular file (never a FIFO or a device, whose reads would wait or never end)."""
    try:
        return stat.S_ISREG(os.stat(real).st_mode)
    except OSError:
        return False


def _file(rel: str, real: Path, kind: object) -> ModelFile:
    from ocibridge.model.package import ModelFile

    found = ModelFile.from_path(rel, real, kind)  # type: ignore[arg-type]
    found.mode = 0o644  # the cache's modes say nothing of the model's: a plain file's mode
    return found


def _glob(rel: str, pattern: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], pattern)


class HubCacheFormat:
    """The Hugging Face Hub cache, one repository of it (``hf:ORG/NAME``)."""

    name: ClassVar[str] = "hf"
    picks_files: ClassVar[bool] = True
    shows_progress: ClassVar[bool] = False

    def read(self, source: str, request: ReadRequest) -> ModelPackage:
        located = request.source
        return read_snapshot(located if isinstance(located, HubReference) else parse_hub_reference(source), request)

    def export(self, store: Store, desc: Descriptor, dest: str, request: ExportRequest) -> PullResult:
        from ocibridge.cache.modelcache import ModelCache
        from ocibridge.transfer.pull_result import PullResult

        located = request.destination
        hub = located if isinstance(located, HubReference) else parse_hub_reference(dest)  # before any fetch
        select = request.select
        cache = ModelCache()
        snap = cache.snapshot(store, desc.digest, shown=desc.digest,
                              include=select.include if select else (),
                              exclude=select.exclude if select else (),
                              concurrency=request.concurrency)
        files = into_hub_cache(cache, snap, hub)
        size = sum((snap.path / f).stat().st_size for f in files)
        return PullResult(desc.digest, dest, self.name, tuple(files), size)


def into_hub_cache(cache: ModelCache, snap: Snapshot, dest: HubReference) -> list[str]:
    """Lay a model cache snapshot out in the Hub cache as ``hf:ORG/NAME[@REF]`` (the ref
    ``main`` by default) names it: the commit it came from when it came from the Hub (its
    ``image.revision``), else a name made of its digest."""
    from ocibridge.kinds.hf.hubwrite import write_hub_snapshot
    from ocibridge.oci.models import Manifest, parse_manifest_bytes

    repo_id, ref = dest.repo_id, dest.revision
    manifest = parse_manifest_bytes(cache.blobs.fetch_bytes(snap.manifest), snap.manifest.mediaType)
    said = (manifest.annotations or {}).get(REVISION_ANNOTATION, "") if isinstance(manifest, Manifest) else ""
    commit = said if COMMIT.fullmatch(said) else snap.manifest.digest.split(":", 1)[1][:40]
    return write_hub_snapshot(snap.path, repo_folder(repo_id, repo_type=dest.repo_type), commit, ref=ref or "main")
