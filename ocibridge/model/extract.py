"""Pull to a directory: an artifact's layers become files again, verified, never outside DIR.

The directory is a copy's destination (:class:`DirectoryTarget`, as oras-go's file store is a
Target): the one copy walks the artifact and sends each layer, and each becomes its files in a
staging directory inside DIR as it arrives. The manifest comes last, once every layer has been
read to its end (so every digest is verified): then the files are renamed into place.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ocibridge.core.confined import check_links
from ocibridge.core.dirlock import directory_locked
from ocibridge.core.fsutil import TEMP_PREFIX, process_umask, refuse_read_only_directory
from ocibridge.core.overwrite import OnExisting, plan_commit
from ocibridge.core.stale import locked_staging, remove_stale_staging
from ocibridge.core.streams import Reader, open_tar_stream
from ocibridge.errors import OcibridgeError, UnsafePath
from ocibridge.model.paths import ArtifactPaths
from ocibridge.model.stagedfiles import named_as_in_the_artifact, prepare_parent, write_stream
from ocibridge.oci.digest import CHUNK, verified, verify_bytes
from ocibridge.oci.layerinfo import layer_mode
from ocibridge.oci.mediatypes import INDEX_TYPES
from ocibridge.oci.models import Descriptor, Manifest, ManifestRead, parse_manifest_bytes
from ocibridge.stores.base import Reopen, Store, VerifiedFile
from ocibridge.stores.ranged import DeltaBuilder
from ocibridge.stores.tombstones import refuse_tombstone
from ocibridge.transfer.copy import CopyHooks, copy
from ocibridge.transfer.progress import ProgressFn
from ocibridge.transfer.pullcache import cached_pull

if TYPE_CHECKING:  # tar layers' and changesets' modules (tarfile, gzip) load with the first such layer
    from ocibridge.model.changesets import Changes


@dataclass
class ExtractResult:
    manifest: Descriptor | None
    files: list[str] = field(default_factory=list)
    bytes_written: int = 0
    kept: list[str] = field(default_factory=list)  # existing files left alone (OnExisting.KEEP)
    skipped: list[str] = field(default_factory=list)  # not selected (pull --include/--exclude)
    #: path -> digest of the early-draft layer whose file it is (what kind the file is)
    origins: dict[str, str] = field(default_factory=dict)
    #: path -> the digest its bytes were checked against as they landed, for files in place now
    #: (a raw layer's; a tar entry's SHA-256, when asked for, taken as it was unpacked); a file kept
    #: (-k) or laid over by a changeset has none: model.sig's check reads those, and only those
    digests: dict[str, str] = field(default_factory=dict)


def resolve_model(store: Store, reference: str) -> Descriptor:
    """What ``reference`` names, with an index holding one ModelPack entry resolved to that
    entry (see :func:`fetch_manifest`); a manifest is not fetched to find out."""
    desc = store.resolve(reference)
    refuse_tombstone(store, desc, reference)
    if desc.mediaType not in INDEX_TYPES:
        return desc
    return _model_manifest(store, desc, reference).desc


def fetch_manifest(store: Store, reference: str) -> tuple[Descriptor, Manifest]:
    """The model manifest ``reference`` names. An index holding exactly one ModelPack entry (by
    its ``artifactType``, as ``k8s modelcar --index`` writes) resolves to that entry."""
    read = read_model_manifest(store, reference)
    return read.desc, read.manifest


def read_model_manifest(store: Store, reference: str) -> ManifestRead:
    """:func:`fetch_manifest`, with the bytes read: handed to whatever judges the same manifest
    next (``inspect``'s family), which then reads it no second time."""
    desc = store.resolve(reference)
    refuse_tombstone(store, desc, reference)
    return _model_manifest(store, desc, reference)


def held_manifest(store: Store, desc: Descriptor) -> ManifestRead:
    """The model manifest at ``desc`` of a store that holds it in memory (an artifact built or
    converted here: no request), read and parsed once to be handed down to the export."""
    data = store.fetch_bytes(desc)
    manifest = parse_manifest_bytes(data, desc.mediaType)
    if not isinstance(manifest, Manifest):
        raise OcibridgeError(f"{desc.digest} is an index, not a model manifest; pick one by digest")
    return ManifestRead(desc, data, manifest)


def _model_manifest(store: Store, desc: Descriptor, reference: str) -> ManifestRead:
    """The manifest at the resolved ``desc``, following an index to its ModelPack entry
    (:func:`.index.model_entry`)."""
    data = store.fetch_bytes(desc)
    manifest = parse_manifest_bytes(data, desc.mediaType)
    if isinstance(manifest, Manifest):
        return ManifestRead(desc, data, manifest)
    from ocibridge.model.index import model_entry

    found = model_entry(store, manifest)
    if found is None:
        raise OcibridgeError(f"{reference} is an index with no ModelPack manifest; pick one by digest")
    return ManifestRead(found.desc, found.data, found.manifest)


def _extract_tar(stream: Reader, staging: Path, written: list[str], paths: ArtifactPaths,
                 select: Callable[[str], bool] | None = None, skipped: list[str] | None = None,
                 digests: dict[str, str] | None = None) -> int:
    """Unpack one tar layer into ``staging``, each entry judged by ``paths`` first (the same
    judgement as a mount's and a lazy read's) and refused before anything is written;
    ``digests``: each regular file's SHA-256, hashed as it is written."""
    import hashlib

    from ocibridge.layers.tarwalk import tar_members

    total = 0
    with open_tar_stream(stream) as tar:
        for member in tar_members(tar):
            rel = paths.member(member)
            if rel is None:
                continue  # the layer's root ('./', as `tar -C DIR -cf x.tar .` writes it)
            if select is not None and not select(rel):
                if skipped is not None and not member.isdir():
                    skipped.append(rel)
                continue
            if member.isdir():
                prepare_parent(staging, rel + "/x")
                continue
            target = prepare_parent(staging, rel)
            if target.exists() or target.is_symlink():  # (judged already: a staging directory shared by mistake)
                raise OcibridgeError(f"duplicate path in artifact: {rel}")
            if member.issym():  # (judged: it stays inside)
                with named_as_in_the_artifact(rel):
                    os.symlink(member.linkname, target)
            else:  # (judged: a regular file)
                src = tar.extractfile(member)
                assert src is not None
                mode = 0o755 if member.mode & 0o111 else 0o644
                hasher = hashlib.sha256() if digests is not None else None
                with named_as_in_the_artifact(rel):
                    total += write_stream(src, target, mode, member.size, hasher)
                if digests is not None and hasher is not None:
                    digests[rel] = "sha256:" + hasher.hexdigest()
            written.append(rel)
    while stream.read(CHUNK):  # trailing padding, to EOF where the layer is verified
        pass
    return total


def extract(
    store: Store, reference: str, dest: str | os.PathLike[str], *, concurrency: int = 4,
    progress: ProgressFn | None = None, select: Callable[[str], bool] | None = None,
    on_existing: OnExisting = OnExisting.OVERWRITE,
) -> ExtractResult:
    """Write the files of the artifact ``reference`` into ``dest`` (created if missing): the
    one copy from ``store`` into a :class:`DirectoryTarget`.

    Layers are fetched concurrently (tar layers unpacked one at a time). ``progress`` hears of
    every layer up front, then of the bytes read as they come. ``select`` (a path predicate)
    leaves out raw layers unfetched and tar entries unwritten; ``on_existing`` decides about
    files already in ``dest`` (see :mod:`ocibridge.core.overwrite`).
    """
    return extract_model(store, resolve_model(store, reference), None, dest, concurrency=concurrency,
                         progress=progress, select=select, on_existing=on_existing)


def extract_model(
    store: Store, desc: Descriptor, manifest: Manifest | None, dest: str | os.PathLike[str], *,
    concurrency: int = 4, progress: ProgressFn | None = None, select: Callable[[str], bool] | None = None,
    on_existing: OnExisting = OnExisting.OVERWRITE, data: bytes | None = None,
    resumable: bool = False, delta: DeltaBuilder | None = None, hash_entries: bool = False,
) -> ExtractResult:
    """:func:`extract` of the model manifest at ``desc``, already resolved; ``manifest``, its
    parsed form when the caller has it in hand (then it is judged as it is, not parsed again),
    and ``data``, its bytes as read and checked (then the copy does not read them again).

    ``resumable``: the layers come through the pull cache (:func:`.pullcache.cached_pull`:
    kept there until the pull succeeds, and not fetched where ``dest`` holds the file already),
    ``delta`` building a blob from chunks held here where a chunk table allows it.
    ``hash_entries``: tar entries' SHA-256 taken as they are unpacked (``ExtractResult.digests``)."""
    in_hand = {desc.digest: manifest} if manifest is not None else {}
    target = DirectoryTarget(dest, select=select, on_existing=on_existing, in_hand=in_hand,
                             hash_entries=hash_entries)
    reads = cached_pull(store, target.out, progress, delta) if resumable else contextlib.nullcontext(store)
    with reads as source, target.writing():
        copy(source, desc, target, concurrency=concurrency, progress=progress,
             hooks=CopyHooks(successors=target.successors,
                             in_hand={desc.digest: data} if data is not None else {}))
    return target.result


class DirectoryTarget:
    """A directory as a copy's destination: it keeps files, not blobs.

    What it takes of a manifest is its layers (:meth:`successors`: no config; raw layers not
    selected are left out before anything is fetched). Each layer pushed becomes its files in
    a staging directory inside DIR; the manifest, pushed last, commits them into place all at
    once. Nothing can be read back: it holds no blob, resolves no reference.
    """

    def __init__(self, dest: str | os.PathLike[str], *, select: Callable[[str], bool] | None = None,
                 on_existing: OnExisting = OnExisting.OVERWRITE, in_hand: dict[str, Manifest] | None = None,
                 hash_entries: bool = False):
        self.out = Path(dest)
        self._hash_entries = hash_entries  # tar entries' SHA-256 as they are unpacked (--with-signatures)
        self._in_hand = dict(in_hand or {})  # manifests the caller parsed already, by digest
        self.select = select
        self.on_existing = on_existing
        self.result = ExtractResult(None)
        self._staging: Path | None = None
        self._raw: dict[str, list[tuple[str, int]]] = {}  # digest -> (path, mode) of raw layers
        self._changesets: dict[str, int] = {}  # digest -> position of the draft's changeset layers
        self._changes: dict[int, Changes] = {}  # what each changeset layer wrote and deleted
        self._lock = threading.Lock()
        self._tar_lock = threading.Lock()  # tar layers unpack one at a time: their paths may meet
        self._paths: ArtifactPaths | None = None  # the manifest's paths, judged (successors)

    def describe(self) -> str:
        return str(self.out)

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Stage inside DIR for the block; on failure, DIR is as it was (a DIR the block
        created goes again)."""
        out = self.out
        if out.exists() and not out.is_dir():
            raise OcibridgeError(f"{out} exists and is not a directory")
        refuse_read_only_directory(out)  # before a stale staging directory is swept from it
        made = _missing_dirs(out)
        out.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(out)  # what pulls killed here before left behind
        with locked_staging(out) as staging:
            self._staging = staging
            try:
                yield
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                for directory in made:
                    with contextlib.suppress(OSError):
                        directory.rmdir()
                raise
            finally:
                shutil.rmtree(staging, ignore_errors=True)
                self._staging = None
        remove_stale_staging(out)  # one a run killed just before this one began is old enough now
        self.result.files.sort()

    def successors(self, desc: Descriptor, data: bytes) -> list[Descriptor]:
        """The layers this directory takes, checked before any is fetched: raw ones (each a
        file, at a path of its own) first, then tar layers in manifest order."""
        known = self._in_hand.get(desc.digest)
        node = known if known is not None else parse_manifest_bytes(data, desc.mediaType)
        if not isinstance(node, Manifest):
            raise OcibridgeError(f"{desc.digest} is an index, not a model manifest; pick one by digest")
        judged = self._paths = ArtifactPaths(node)  # the whole artifact, whatever is selected
        # a filesystem changeset (the early CNAI draft) is unpacked apart, laid over the others
        # in manifest order once all are in (whiteouts apply)
        self._changesets = {layer.digest: at for at, layer in enumerate(judged.changesets)}
        raw: list[tuple[Descriptor, str]] = []
        for f in judged.raw:
            if self.select is not None and not self.select(f.path):
                self.result.skipped.append(f.path)
            else:
                raw.append((f.layer, f.path))
        self._raw = {}
        for layer, rel in raw:  # files of equal content are one blob: fetched once, written to each
            self._raw.setdefault(layer.digest, []).append((rel, layer_mode(layer)))
        self.result.files.extend(rel for _, rel in raw)
        packed = {layer.digest for layer in judged.tars + judged.changesets}
        return [*{layer.digest: layer for layer, _ in raw}.values(),
                *(layer for layer in node.layers if layer.digest in packed)]  # (tars in manifest order)

    def _judged(self) -> ArtifactPaths:
        if self._paths is None:
            raise OcibridgeError(f"{self.describe()}: a layer came before its manifest")
        return self._paths

    # -- what the copy asks: a directory holds no blobs, so every layer is taken ---------------
    def exists(self, desc: Descriptor) -> bool:
        return False

    # -- writes ------------------------------------------------------------------------------
    def push_blob(self, desc: Descriptor, reader: BinaryIO, *, reopen: Reopen | None = None) -> None:
        """Write the layer's files into the staging directory, reading it to its end."""
        staging = self._staging
        if staging is None:
            raise OcibridgeError(f"{self.describe()}: not open for writing")
        paths = self._raw.get(desc.digest)
        if paths is not None:
            first, mode = paths[0]
            written = _write_raw(reader, desc, first, staging, mode)
            for rel, mode in paths[1:]:
                with named_as_in_the_artifact(rel):
                    shutil.copyfile(staging / first, prepare_parent(staging, rel))
                    os.chmod(staging / rel, mode & ~process_umask())
                written += desc.size
            with self._lock:  # checked against it as it landed (_write_raw, or the verified file it links)
                self.result.digests.update((rel, desc.digest) for rel, _ in paths)
        elif desc.digest in self._changesets:
            from ocibridge.layers.reader import layer_stream, readable_layer
            from ocibridge.model.changesets import CHANGESETS, Changes, unpack_changeset

            at = self._changesets[desc.digest]
            changes = Changes(staging / CHANGESETS / str(at))
            with readable_layer(desc):
                unpack_changeset(layer_stream(reader, desc), changes, self.select)
            written = 0  # counted once laid over the others: a file a later layer deletes is no pull's
            with self._lock:
                self._changes[at] = changes
                self.result.skipped.extend(changes.skipped)
        else:
            from ocibridge.layers.reader import layer_stream, readable_layer

            files: list[str] = []
            skipped: list[str] = []
            digests: dict[str, str] | None = {} if self._hash_entries else None
            with self._tar_lock, readable_layer(desc):
                written = _extract_tar(layer_stream(reader, desc), staging, files, self._judged(), self.select,
                                       skipped, digests)
            with self._lock:
                self.result.files.extend(files)
                self.result.skipped.extend(skipped)
                self.result.digests.update(digests or {})
        with self._lock:
            self.result.bytes_written += written

    def push_manifest(self, desc: Descriptor, data: bytes, tag: str | None = None) -> None:
        """Every layer is in: check the staged links, then move the files into place."""
        verify_bytes(data, desc.digest, desc.size, what="manifest")
        staging = self._staging
        if staging is None:
            raise OcibridgeError(f"{self.describe()}: not open for writing")
        self.result.manifest = desc
        if self._changes:
            from ocibridge.model.changesets import lay_over

            layers = [self._changes[i] for i in sorted(self._changes)]
            digests = {at: digest for digest, at in self._changesets.items()}
            laid = lay_over(staging, layers, set(self.result.files))
            self.result.origins = {rel: digests[at] for rel, at in laid.items()}
            self.result.bytes_written += sum((staging / rel).lstat().st_size for rel in laid
                                             if not (staging / rel).is_symlink())
            self.result.files = sorted([*self.result.files, *laid])
        # the look at DIR and the move into it are one step: a concurrent pull into DIR
        # commits wholly before or after, and the later one sees the earlier one's files
        with directory_locked(self.out):
            _check_staged_links(staging, self.out, self.result.files)
            plan = plan_commit(staging, self.out, self.result.files, self.on_existing)
            self.result.kept = plan.kept
            for rel in plan.kept:  # the file in place is not the one checked
                self.result.digests.pop(rel, None)
            _commit(staging, self.out, plan.write)



def _write_raw(reader: BinaryIO, layer: Descriptor, rel: str, staging: Path, mode: int) -> int:
    target = prepare_parent(staging, rel)
    if isinstance(reader, VerifiedFile):  # verified in a file already: linked, not copied
        with named_as_in_the_artifact(rel):
            return reader.link_to(target, mode & ~process_umask())
    checked = verified(reader, layer.digest, layer.size, what="layer")
    with named_as_in_the_artifact(rel):
        written = write_stream(checked, target, mode)
    checked.read(1)  # EOF: verification happens here
    return written


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
