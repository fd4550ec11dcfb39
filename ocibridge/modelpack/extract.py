"""Pull to a directory: an artifact's layers become files again, verified, never outside DIR.

Everything is written into a staging directory inside DIR first; only when every layer has
been read to the end (so every digest is verified) are the files renamed into place.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..confined import check_links
from ..errors import OcibridgeError, UnsafePath
from ..fsutil import TEMP_PREFIX, link_stays_inside, process_umask, safe_relpath
from ..oci.digest import CHUNK
from ..oci.mediatypes import (
    ANNOTATION_TITLE,
    INDEX_TYPES,
    Family,
    Variant,
    family_of_artifact,
    parse_layer_media_type,
)
from ..oci.models import Descriptor, Index, Manifest, parse_manifest_bytes
from ..overwrite import OnExisting, plan_commit
from ..progress import ProgressFn, counting
from ..pullcache import LinkableBlob
from ..stores.base import MAX_MANIFEST_BYTES, Store
from ..streams import Reader, gunzip, open_tar_stream, unzstd

#: A tar layer may not expand beyond this many times its compressed size, nor hold more entries.
MAX_EXPANSION_RATIO = 1000
MAX_TAR_ENTRIES = 1_000_000
#: Index entries read to find a ModelPack manifest when none carries an artifactType.
MAX_INDEX_ENTRIES_READ = 32


@dataclass
class ExtractResult:
    manifest: Descriptor
    files: list[str] = field(default_factory=list)
    bytes_written: int = 0
    kept: list[str] = field(default_factory=list)  # existing files left alone (OnExisting.KEEP)
    skipped: list[str] = field(default_factory=list)  # not selected (pull --include/--exclude)


def layer_path(desc: Descriptor) -> str | None:
    """The model path a layer carries: the filepath annotation of either family, else the title."""
    annotations = desc.annotations or {}
    for family in Family:
        if family.filepath_key in annotations:
            return annotations[family.filepath_key]
    return annotations.get(ANNOTATION_TITLE)


def layer_mode(desc: Descriptor) -> int:
    annotations = desc.annotations or {}
    for family in Family:
        raw = annotations.get(family.metadata_key)
        if raw:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                mode = int(json.loads(raw).get("mode", 0o644))
                return 0o755 if mode & 0o111 else 0o644
    return 0o644


def resolve_model(store: Store, reference: str) -> Descriptor:
    """What ``reference`` names, with an index holding one ModelPack entry resolved to that
    entry (see :func:`fetch_manifest`); a manifest is not fetched to find out."""
    desc = store.resolve(reference)
    if desc.mediaType not in INDEX_TYPES:
        return desc
    return _model_manifest(store, desc, reference)[0]


def fetch_manifest(store: Store, reference: str) -> tuple[Descriptor, Manifest]:
    """The model manifest ``reference`` names. An index holding exactly one ModelPack entry (by
    its ``artifactType``, as ``k8s modelcar --index`` writes) resolves to that entry."""
    return _model_manifest(store, store.resolve(reference), reference)


def _model_manifest(store: Store, desc: Descriptor, reference: str) -> tuple[Descriptor, Manifest]:
    """The manifest at the resolved ``desc``, following an index to its one ModelPack entry."""
    manifest = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
    if not isinstance(manifest, Manifest):
        models = [e for e in manifest.manifests if family_of_artifact(e.artifactType, None) is not None]
        if not models:  # entries without artifactType (skopeo copy --all drops it): read them
            models = _modelpack_entries(store, manifest)
        if len(models) != 1:
            raise OcibridgeError(f"{reference} is an index, not a model manifest; pick one by digest")
        desc = models[0]
        manifest = parse_manifest_bytes(store.fetch_bytes(desc), desc.mediaType)
        if not isinstance(manifest, Manifest):
            raise OcibridgeError(f"{reference}: the index's model entry {desc.digest} is itself an index")
    return desc, manifest


def _modelpack_entries(store: Store, index: Index) -> list[Descriptor]:
    """Entries of ``index`` whose manifest is ModelPack (a bounded number of entries is read)."""
    found = []
    for entry in index.manifests[:MAX_INDEX_ENTRIES_READ]:
        if entry.mediaType in INDEX_TYPES or entry.size > MAX_MANIFEST_BYTES:
            continue
        node = parse_manifest_bytes(store.fetch_bytes(entry), entry.mediaType)
        if isinstance(node, Manifest) and family_of_artifact(node.artifactType, node.config.mediaType):
            found.append(entry)
    return found


class _BoundedReader:
    """Counts decompressed bytes and stops a decompression bomb early."""

    def __init__(self, raw: Reader, limit: int):
        self._raw = raw
        self._limit = limit
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self.count += len(data)
        if self.count > self._limit:
            raise OcibridgeError(f"layer expands beyond {self._limit} bytes: refusing (bomb limit)")
        return data


def _decompressed(reader: Reader, variant: Variant, size: int) -> Reader:
    if variant is Variant.TAR_GZIP:
        stream = gunzip(reader)
    elif variant is Variant.TAR_ZSTD:
        stream = unzstd(reader)
    else:
        return reader
    return _BoundedReader(stream, max(size, 1 << 20) * MAX_EXPANSION_RATIO)


def _write_stream(src: Reader, dest: Path, mode: int, remaining: int | None = None) -> int:
    total = 0
    with open(dest, "xb") as out:
        while True:
            want = CHUNK if remaining is None else min(CHUNK, remaining - total)
            if want <= 0:
                break
            data = src.read(want)
            if not data:
                break
            out.write(data)
            total += len(data)
    os.chmod(dest, mode & ~process_umask())
    return total


def _prepare_parent(staging: Path, rel: str) -> Path:
    """The staged path for ``rel``, refusing to go through a staged symlink."""
    target = staging / rel
    parent = target.parent
    # Walk each component: none may be a symlink (a link could redirect writes out of DIR).
    current = staging
    for part in Path(rel).parent.parts:
        current = current / part
        if current.is_symlink():
            raise UnsafePath(f"{rel}: a parent directory is a symlink in the artifact")
        if current.exists() and not current.is_dir():
            conflict = current.relative_to(staging).as_posix()
            raise OcibridgeError(f"the artifact holds {conflict} as a file and as a directory")
    with _named_as_in_the_artifact(rel):
        parent.mkdir(parents=True, exist_ok=True)
    return target


@contextlib.contextmanager
def _named_as_in_the_artifact(rel: str) -> Iterator[None]:
    """A file-system refusal while staging names the artifact's path, not the staging folder's."""
    try:
        yield
    except OSError as error:
        if error.errno in (errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise OcibridgeError(f"the artifact holds {rel} as a file and as a directory") from None
        if error.errno == errno.ENAMETOOLONG:
            raise OcibridgeError(f"{rel[:80]}…: name too long for this file system") from None
        raise


def _extract_tar(stream: Reader, staging: Path, written: list[str],
                 select: Callable[[str], bool] | None = None, skipped: list[str] | None = None) -> int:
    total = 0
    count = 0
    with open_tar_stream(stream) as tar:
        for member in tar:
            count += 1
            if count > MAX_TAR_ENTRIES:
                raise OcibridgeError("tar layer has too many entries (bomb limit)")
            if member.isdir() and member.name.strip("/") in ("", "."):
                continue  # the layer's root ('./', as `tar -C DIR -cf x.tar .` writes it)
            rel = safe_relpath(member.name, "tar entry")
            if select is not None and not select(rel):
                if skipped is not None and not member.isdir():
                    skipped.append(rel)
                continue
            if member.isdir():
                _prepare_parent(staging, rel + "/x")
                continue
            target = _prepare_parent(staging, rel)
            if target.exists() or target.is_symlink():
                raise OcibridgeError(f"duplicate path in artifact: {rel}")
            if member.issym():
                if not link_stays_inside(rel, member.linkname):
                    raise UnsafePath(f"{rel}: symlink points outside the model ({member.linkname})")
                with _named_as_in_the_artifact(rel):
                    os.symlink(member.linkname, target)
            elif member.isfile():
                src = tar.extractfile(member)
                assert src is not None
                mode = 0o755 if member.mode & 0o111 else 0o644
                with _named_as_in_the_artifact(rel):
                    total += _write_stream(src, target, mode, member.size)
            else:
                raise UnsafePath(f"{rel}: unsupported tar entry type (hard link or device)")
            written.append(rel)
        # Drain trailing padding so the verifying reader sees EOF.
    while stream.read(CHUNK):
        pass
    return total


def _extract_raw(
    store: Store, layer: Descriptor, rel: str, staging: Path, progress: ProgressFn | None
) -> int:
    target = _prepare_parent(staging, rel)
    blob = store.open_blob(layer)
    if isinstance(blob, LinkableBlob):  # verified in a file already: linked, not copied
        with blob, _named_as_in_the_artifact(rel):
            written = blob.link_to(target, layer_mode(layer) & ~process_umask())
    else:
        with counting(blob, layer, progress) as reader:
            with _named_as_in_the_artifact(rel):
                written = _write_stream(reader, target, layer_mode(layer))
            reader.read(1)  # EOF: verification happens here
    if progress:
        progress("done", layer, layer.size)
    return written


def _extract_tar_layer(
    store: Store, layer: Descriptor, variant: Variant, staging: Path, files: list[str],
    progress: ProgressFn | None, select: Callable[[str], bool] | None = None,
    skipped: list[str] | None = None,
) -> int:
    with counting(store.open_blob(layer), layer, progress) as reader:
        written = _extract_tar(_decompressed(reader, variant, layer.size), staging, files, select, skipped)
        while reader.read(CHUNK):
            pass
    if progress:
        progress("done", layer, layer.size)
    return written


def extract(
    store: Store, reference: str, dest: str | os.PathLike[str], *, concurrency: int = 4,
    progress: ProgressFn | None = None, select: Callable[[str], bool] | None = None,
    on_existing: OnExisting = OnExisting.OVERWRITE,
) -> ExtractResult:
    """Write the files of the artifact ``reference`` into ``dest`` (created if missing).

    Raw layers are fetched concurrently, tar layers one after another in manifest order.
    ``progress`` hears of every layer up front, then of the bytes read as they come.
    ``select`` (a path predicate) leaves out raw layers unfetched and tar entries unwritten;
    ``on_existing`` decides about files already in ``dest`` (see :mod:`ocibridge.overwrite`).
    """
    desc, manifest = fetch_manifest(store, reference)
    raw: list[tuple[Descriptor, str]] = []
    tars: list[tuple[Descriptor, Variant]] = []
    unselected: list[str] = []
    for layer in manifest.layers:
        kind = parse_layer_media_type(layer.mediaType)
        if kind is None or kind.variant is Variant.RAW:
            name = layer_path(layer)
            if name is None:
                raise OcibridgeError(f"layer {layer.digest} has no file path annotation")
            rel = safe_relpath(name, "layer file path")
            if select is not None and not select(rel):
                unselected.append(rel)
                continue
            raw.append((layer, rel))
        else:
            tars.append((layer, kind.variant))
    paths = [rel for _, rel in raw]
    if len(set(paths)) != len(paths):
        dup = next(p for p in paths if paths.count(p) > 1)
        raise OcibridgeError(f"duplicate path in artifact: {dup}")
    out = Path(dest)
    if out.exists() and not out.is_dir():
        raise OcibridgeError(f"{out} exists and is not a directory")
    made = _missing_dirs(out)
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=out))
    result = ExtractResult(desc, skipped=unselected)
    if progress:
        for layer in [*(r[0] for r in raw), *(t[0] for t in tars)]:
            progress("plan", layer, 0)
    try:
        with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="pull") as pool:
            futures = [pool.submit(_extract_raw, store, layer, rel, staging, progress) for layer, rel in raw]
            errors = []
            for future in futures:
                try:
                    result.bytes_written += future.result()
                except BaseException as e:
                    errors.append(e)
            if errors:
                raise errors[0]
        result.files.extend(paths)
        for layer, variant in tars:
            result.bytes_written += _extract_tar_layer(
                store, layer, variant, staging, result.files, progress, select, result.skipped)
        _check_staged_links(staging, out, result.files)
        plan = plan_commit(staging, out, result.files, on_existing)
        result.kept = plan.kept
        _commit(staging, out, plan.write)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for directory in made:  # a destination this pull created goes again
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    result.files.sort()
    return result


def _missing_dirs(path: Path) -> list[Path]:
    """The directories ``mkdir(parents=True)`` would create for ``path``, deepest first."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def _check_staged_links(staging: Path, out: Path, files: list[str]) -> None:
    """Every staged link, followed through the other staged links and those already in DIR,
    stays inside DIR (a chain of links that each look harmless can climb out of it)."""
    links = {rel: os.readlink(staging / rel) for rel in files if (staging / rel).is_symlink()}
    if not links:
        return

    def existing_link(rel: str) -> str | None:
        path = out / rel
        return os.readlink(path) if path.is_symlink() else None

    check_links(links, also=existing_link)


def _commit(staging: Path, out: Path, files: list[str]) -> None:
    """Move verified files from staging into place, all or nothing.

    Nothing is written through a symlink in DIR. A file that is replaced is first moved aside
    (into a directory of its own beside the staging one, on the same file system: inside the
    staging tree an artifact file could bear the backup's name); if any step fails, every file
    moved in is taken out again, every file moved aside goes back and every directory made is
    removed, so DIR is as it was.
    """
    aside: Path | None = None
    moved_in: list[Path] = []
    moved_aside: list[tuple[Path, Path]] = []
    made_dirs: list[Path] = []
    try:
        for i, rel in enumerate(sorted(files)):
            src = staging / rel
            dst = out / rel
            current = out
            for part in Path(rel).parent.parts:
                current = current / part
                if current.is_symlink():
                    raise UnsafePath(f"{rel}: {current} is a symlink in the destination")
                if not current.exists():
                    current.mkdir()
                    made_dirs.append(current)
            if dst.is_dir() and not dst.is_symlink():
                raise OcibridgeError(f"{dst} is a directory; cannot replace it with a file")
            if dst.exists() or dst.is_symlink():
                if aside is None:
                    aside = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=out))
                backup = aside / str(i)
                os.rename(dst, backup)
                moved_aside.append((backup, dst))
            os.replace(src, dst)
            moved_in.append(dst)
    except BaseException:
        for path in reversed(moved_in):
            with contextlib.suppress(OSError):
                os.unlink(path)
        for backup, dst in reversed(moved_aside):
            with contextlib.suppress(OSError):
                os.rename(backup, dst)
        for directory in reversed(made_dirs):
            with contextlib.suppress(OSError):
                directory.rmdir()
        if aside is not None:  # empty once every file is back; kept (not lost) if one is not
            with contextlib.suppress(OSError):
                aside.rmdir()
        raise
    if aside is not None:  # the replaced files' old versions
        shutil.rmtree(aside, ignore_errors=True)


def is_regular(path: Path) -> bool:
    return stat.S_ISREG(path.lstat().st_mode)
