"""Plain model directories: every regular file becomes a model file, its kind inferred by name."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar

from ocibridge.core.fsutil import is_utf8_name, link_stays_inside
from ocibridge.errors import OcibridgeError, SourceError
from ocibridge.kinds.source import ExportRequest, ReadRequest

if TYPE_CHECKING:
    from ocibridge.model.package import ModelPackage
    from ocibridge.oci.mediatypes import Kind
    from ocibridge.oci.models import Descriptor
    from ocibridge.stores.base import Store
    from ocibridge.transfer.pull_result import PullResult

def read_directory(
    root: str | os.PathLike[str],
    *,
    overrides: Sequence[tuple[str, Kind]] = (),
    excludes: tuple[str, ...] = (),
    name: str | None = None,
) -> ModelPackage:
    """Walk ``root`` in byte order. Symlinks inside the tree are kept as links; links that point
    outside it, sockets and devices are refused with a clear error."""
    # reading only: a pull into a directory needs neither
    from ocibridge.model.classify import DEFAULT_EXCLUDES, classify, excluded
    from ocibridge.model.package import ModelFile, ModelPackage

    base = Path(root)
    if not base.exists():
        raise SourceError(f"{base}: no such file or directory")
    if not base.is_dir():
        raise SourceError(f"{base}: not a directory")
    patterns = DEFAULT_EXCLUDES + tuple(excludes)
    files: list[ModelFile] = []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        current = base / rel_dir if rel_dir else base
        try:
            entries = sorted(os.scandir(current), key=lambda e: os.fsencode(e.name))
        except OSError as e:
            raise SourceError(f"{current}: cannot read directory: {e.strerror}") from None
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if excluded(rel, patterns):
                continue
            if not is_utf8_name(entry.name):
                raise SourceError(f"{rel}: its name is not UTF-8, and an artifact's paths are text: rename it, "
                                  "or leave it out with --exclude")
            if entry.is_symlink():
                target = os.readlink(entry.path)
                if not link_stays_inside(rel, target):
                    raise SourceError(f"{rel}: symlink points outside the model ({target})")
                files.append(
                    ModelFile(rel, classify(rel, 0, overrides), 0, link_target=target)
                )
            elif entry.is_dir():
                stack.append(rel)
            elif entry.is_file():
                path = Path(entry.path)
                if not os.access(path, os.R_OK):
                    raise SourceError(f"{rel}: file is not readable")
                size = entry.stat().st_size
                files.append(ModelFile.from_path(rel, path, classify(rel, size, overrides)))
            else:
                raise SourceError(f"{rel}: not a regular file, directory or symlink")
    if not files:
        raise SourceError(f"{base}: no files to package")
    files.sort(key=lambda f: f.path.encode())
    model_name = name or base.resolve().name
    return ModelPackage(files=files, descriptor={"name": model_name}, source_format="directory")


class DirectoryFormat:
    """A plain model directory in the table of kinds: the fallback for a local path. Read with
    its metadata (config.json, safetensors and GGUF headers); pulled into file by file, only
    the files asked for, resumable."""

    name: ClassVar[str] = "directory"
    picks_files: ClassVar[bool] = True
    shows_progress: ClassVar[bool] = True

    def read(self, source: str, request: ReadRequest) -> ModelPackage:
        from ocibridge.model import metadata

        package = read_directory(source, overrides=request.kind_overrides, excludes=request.excludes,
                                 name=request.name)
        metadata.fill(package)  # architecture, family, precision, paramSize from the files
        return package

    def export(self, store: Store, desc: Descriptor, dest: str, request: ExportRequest) -> PullResult:
        """The manifest comes in hand (``request.manifest``, read, checked and parsed by the pull);
        what the bytes meet, in their order: the delta (the chunk table it binds), the pull
        cache (resumable, files already in DEST with the right digest not fetched), the files."""
        from ocibridge.cache.deltas import pull_delta
        from ocibridge.core.overwrite import OnExisting
        from ocibridge.model.extract import extract_model
        from ocibridge.transfer.pull_result import PullResult

        read = request.manifest
        if read is None:
            raise OcibridgeError(f"a pull of {desc.digest} into a directory is handed its manifest, read and parsed")
        delta = pull_delta(read.desc, read.manifest, Path(dest), table_checks=request.table_checks)
        result = extract_model(store, read.desc, read.manifest, dest, concurrency=request.concurrency,
                               progress=request.progress, select=request.select,
                               on_existing=request.on_existing or OnExisting.REFUSE, data=read.data,
                               resumable=True, delta=delta, hash_entries=request.entry_digests)
        reused = tuple(done.as_dict() for done in delta.results)
        return PullResult(desc.digest, dest, self.name, tuple(result.files), result.bytes_written,
                          kept=tuple(result.kept), skipped=tuple(sorted(result.skipped)), delta=reused,
                          landed=MappingProxyType(result.digests))
