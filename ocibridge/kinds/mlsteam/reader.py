"""Read an ``.mlarchive`` into a neutral model package, without extracting it.

``models/`` files become raw weight layers (one per file), ``hooks/`` and ``src/`` become one
tar code layer each, and ``manifest.json`` travels verbatim as a raw weight.config layer. Every
file is streamed from its zip entry when the builder asks for it. Hooks are only ever read as
bytes: nothing from the archive is imported or run.
"""

from __future__ import annotations

import os
from pathlib import Path

from ocibridge.core.fsutil import safe_relpath
from ocibridge.errors import SourceError, UnsafePath
from ocibridge.kinds.mlsteam.manifest import MANIFEST_NAME, MlarchiveManifest, hook_file, parse_manifest
from ocibridge.kinds.mlsteam.mapping import annotations_of, config_of, descriptor_of
from ocibridge.kinds.mlsteam.ziparchive import (
    DEFAULT_LIMITS,
    ZipEntry,
    ZipLimits,
    open_entry,
    read_small_entry,
    scan_zip,
)
from ocibridge.model.classify import classify
from ocibridge.model.package import ModelFile, ModelPackage
from ocibridge.oci.mediatypes import Kind

SOURCE_FORMAT = "mlarchive"
MODELS_DIR = "models"
#: Code directories, each packed as one tar layer named after it.
CODE_DIRS = ("hooks", "src")
MAX_MANIFEST_BYTES = 4 * 1024 * 1024


def _top(path: str) -> str:
    return path.split("/", 1)[0] if "/" in path else ""


def _check_models_present(manifest: MlarchiveManifest, paths: set[str]) -> None:
    """Models live under ``models/`` (the SDK writes ``models/<name>/``). If any model has its
    own directory, every model must; a flat ``models/`` is accepted when none does."""
    model_files = [p for p in paths if _top(p) == MODELS_DIR]
    if not model_files:
        names = ", ".join(m.name for m in manifest.models)
        raise SourceError(f"manifest names model(s) {names} but the archive has no models/ files")
    per_model = {
        m.name: any(p.startswith(f"{MODELS_DIR}/{m.name}/") for p in model_files)
        for m in manifest.models
    }
    if any(per_model.values()):
        missing = [name for name, present in per_model.items() if not present]
        if missing:
            raise SourceError(
                f"manifest names model {missing[0]!r} but the archive has no files under "
                f"{MODELS_DIR}/{missing[0]}/"
            )


def _check_references(manifest: MlarchiveManifest, paths: set[str]) -> None:
    """Hook files the manifest names must exist; cleanup globs must stay inside the archive."""
    refs: list[tuple[str, str]] = []
    for i, model in enumerate(manifest.models):
        if (ref := hook_file(model.loader)) is not None:
            refs.append((f"models.{i}.loader", ref))
        elif isinstance(model.loader, dict) and "built-in" not in model.loader:
            raise SourceError(f"{MANIFEST_NAME}: models.{i}.loader: needs 'built-in' or 'file'")
        for j, pattern in enumerate(model.enc_model_cleanup_files or []):
            where = f"models.{i}.enc_model_cleanup_files.{j}"
            try:
                safe_relpath(pattern, where)
            except UnsafePath as e:
                raise UnsafePath(f"{MANIFEST_NAME}: {e}") from None
    for i, service in enumerate(manifest.services or []):
        if (ref := hook_file(service.predictor)) is not None:
            refs.append((f"services.{i}.predictor", ref))
    for where, ref in refs:
        try:
            rel = safe_relpath(ref, where)
        except UnsafePath as e:
            raise UnsafePath(f"{MANIFEST_NAME}: {e}") from None
        candidates = [f"{d}/{rel}" for d in CODE_DIRS] + [rel]
        if not any(c in paths for c in candidates):
            raise SourceError(
                f"{MANIFEST_NAME}: {where}: file {ref!r} is not in the archive "
                f"(looked in hooks/, src/ and the root)"
            )


def _model_file(archive: Path, entry: ZipEntry) -> ModelFile:
    top = _top(entry.path)
    layer: str | None = None
    if entry.path == MANIFEST_NAME:
        kind = Kind.WEIGHT_CONFIG
    elif top == MODELS_DIR:
        kind = Kind.WEIGHT
    elif top in CODE_DIRS:
        kind, layer = Kind.CODE, top
    else:
        kind = classify(entry.path, entry.size)
    return ModelFile(
        path=entry.path,
        kind=kind,
        size=entry.size,
        opener=lambda: open_entry(archive, entry),
        mode=entry.mode,
        layer=layer,
    )


def read_mlarchive(
    path: str | os.PathLike[str], *, limits: ZipLimits = DEFAULT_LIMITS
) -> ModelPackage:
    """An ``.mlarchive`` (schema v2023.1 or v2024.1) as a model package; checks the archive
    and the manifest's references up front and fails with one clear :class:`SourceError`."""
    archive = Path(path)
    entries = scan_zip(archive, limits)
    by_path = {e.path: e for e in entries}
    if MANIFEST_NAME not in by_path:
        raise SourceError(f"{archive}: not an MLSteam archive: no {MANIFEST_NAME} at its root")
    manifest_bytes = read_small_entry(archive, by_path[MANIFEST_NAME], MAX_MANIFEST_BYTES)
    try:
        manifest = parse_manifest(manifest_bytes)
    except SourceError as e:
        raise type(e)(f"{archive}: {e}") from None
    paths = set(by_path)
    try:
        _check_models_present(manifest, paths)
        _check_references(manifest, paths)
    except (SourceError, UnsafePath) as e:
        raise type(e)(f"{archive}: {e}") from None
    files = [_model_file(archive, e) for e in entries]
    files.sort(key=lambda f: f.path.encode())
    return ModelPackage(
        files=files,
        descriptor=descriptor_of(manifest),
        config=config_of(manifest),
        annotations=annotations_of(manifest),
        source_format=SOURCE_FORMAT,
    )
