"""What a source format is: the protocol every format of the table implements, its two
optional capabilities (checked with ``isinstance``), the requests passed to readers and
exporters, and small helpers formats share. Format modules import this module, never the
door (:mod:`.dispatch`), which imports them by name from the table: no cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from ocibridge.errors import OcibridgeError, SourceError

if TYPE_CHECKING:
    from ocibridge.core.overwrite import OnExisting
    from ocibridge.core.pathfilter import PathFilter
    from ocibridge.core.zipbound import ZipMember
    from ocibridge.model.package import ModelPackage
    from ocibridge.oci.mediatypes import Kind
    from ocibridge.oci.models import Descriptor, ManifestRead
    from ocibridge.places.locators import Locator
    from ocibridge.stores.base import Store
    from ocibridge.stores.registry.options import RegistryOptions
    from ocibridge.transfer.progress import ProgressFn
    from ocibridge.transfer.pull_result import PullResult


@dataclass
class ReadRequest:
    """What a reader may use besides the source itself (each format takes what applies)."""

    kind_overrides: Sequence[tuple[str, Kind]] = ()  # --kind GLOB=KIND (directories)
    excludes: tuple[str, ...] = ()  # --exclude GLOB (directories)
    name: str | None = None  # --name
    registry_options: RegistryOptions | None = None  # sources that are stores
    source: Locator | None = None  # the source, located (ollama://HOST/NAME names the model)


@dataclass
class ExportRequest:
    """What an exporter may use besides the artifact and the destination."""

    registry_options: RegistryOptions | None = None
    concurrency: int = 4
    progress: ProgressFn | None = None
    select: PathFilter | None = None  # --include/--exclude: only for formats that pick files
    on_existing: OnExisting | None = None  # files already at the destination (directories)
    destination: Locator | None = None  # the destination as located (places/locate.py), for formats that use it
    # the artifact's manifest as the door read, checked and parsed it (a pull): not read again
    manifest: ManifestRead | None = None
    # a layer may be checked by the chunk table the manifest binds instead of its digest (a pull
    # into a directory that no signature check vouched for by the files' digests alone)
    table_checks: bool = False
    # the SHA-256 of every file unpacked from a tar layer, taken as it is written (--with-signatures:
    # model.sig's check then reads no file the pull proved; a raw layer's is its digest, always known)
    entry_digests: bool = False


class SourceFormat(Protocol):
    """A source format: a model it reads, an artifact it writes back."""

    name: ClassVar[str]
    picks_files: ClassVar[bool]  # honours --include/--exclude (else the whole artifact only)
    shows_progress: ClassVar[bool]  # its export reports progress (else no bar is drawn)

    def read(self, source: str, request: ReadRequest) -> ModelPackage:
        """The model ``source`` names, as a neutral model package (nothing is written)."""
        ...

    def export(self, store: Store, desc: Descriptor, dest: str, request: ExportRequest) -> PullResult:
        """Write the ModelPack artifact ``desc`` of ``store`` at ``dest``, all or nothing."""
        ...


@runtime_checkable
class SniffsContent(Protocol):
    """A format that recognises its files by their first bytes when the name says nothing."""

    def sniff(self, path: Path) -> bool: ...


@runtime_checkable
class ReadsArtifacts(Protocol):
    """A format whose models live in stores as artifacts of a model family (the families
    table detects it by media type): such an artifact is converted wherever it is found."""

    family: ClassVar[str]

    def read_artifact(self, store: Store, reference: str, request: ReadRequest) -> ModelPackage: ...

    def mount_sources(self, origin: Store, reference: str) -> dict[str, Store]:
        """Where the converted model's blobs can be mounted from, by digest (a push's copy
        mounts them within a registry instead of sending them)."""
        ...


# -- helpers for formats ------------------------------------------------------------------------
def existing_file(source: str, what: str = "") -> Path:
    """``source`` as a path to an existing file, or one clear error (``what``: the format
    that reads it, named when a directory was given)."""
    path = Path(source)
    if path.is_dir():
        raise SourceError(f"{source}: a directory, not a file{f' (--format {what} reads a file)' if what else ''}")
    if not path.is_file():
        raise SourceError(f"{source}: no such file")
    return path


def export_file(store: Store, desc: Descriptor, dest: str, request: ExportRequest, name: str,
                write: WriteFile) -> PullResult:
    """An archive export: the artifact's blobs pass the pull cache (resumable across runs),
    then ``write`` builds the file at ``dest``."""
    from ocibridge.core.fsutil import refuse_read_only_target, refuse_special_target
    from ocibridge.core.overwrite import OnExisting
    from ocibridge.transfer.pull_result import PullResult

    out = Path(dest)
    refuse_special_target(out)  # even with --overwrite
    there = (out.exists() or out.is_symlink()) and not out.is_dir()  # a directory: the writer's own error
    if there and request.on_existing is not OnExisting.OVERWRITE:
        _refuse_unless_same(out, lambda path: _write_cached(store, desc, path, request, write))
    else:
        refuse_read_only_target(out)  # even with --overwrite; the same archive read-only is left as it is
        _write_cached(store, desc, out, request, write)
    return PullResult(desc.digest, dest, name)


def _write_cached(store: Store, desc: Descriptor, out: Path, request: ExportRequest, write: WriteFile) -> None:
    from ocibridge.transfer.pullcache import cached_pull

    with cached_pull(store, None, request.progress) as cached:
        write(cached, desc, out)


def _refuse_unless_same(out: Path, build: Callable[[Path], None]) -> None:
    """An archive already at ``out`` stays, unchanged, when it is byte for byte the one ``build``
    makes (the same model pulled again: archives are built deterministically); anything else is
    refused, before a byte is fetched when it cannot be an archive at all (no zip, a link)."""
    import filecmp
    import shutil
    import tempfile

    from ocibridge.core.overwrite import FileExists

    if out.is_symlink() or not out.is_file():
        raise FileExists(str(out), "not a regular file")
    if not starts_with(out, ZIP_MAGIC):
        raise FileExists(str(out), "not an archive")
    aside = Path(tempfile.mkdtemp(prefix=".ocibridge-pull-", dir=out.parent))
    try:
        built = aside / out.name  # the same name: a writer may check its suffix
        build(built)
        if not filecmp.cmp(built, out, shallow=False):
            raise FileExists(str(out), "another archive than this model's")
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def starts_with(path: Path, magic: bytes) -> bool:
    """Whether the file at ``path`` begins with ``magic`` (False when it cannot be read)."""
    try:
        with path.open("rb") as f:
            return f.read(len(magic)) == magic
    except OSError:
        return False


#: The first bytes of a zip archive with at least one entry.
ZIP_MAGIC = b"PK\x03\x04"


def zip_lists(path: Path, names: set[str], scan: Callable[[Path], list[ZipMember]]) -> bool:
    """Whether ``path`` is a zip whose central directory, read by ``scan`` (within its
    format's limits), lists every one of ``names``: how a zip-based format sniffs its files.
    Anything unreadable is not the format."""
    if not starts_with(path, ZIP_MAGIC):
        return False
    try:
        listed = {entry.path for entry in scan(path)}
    except (OcibridgeError, OSError, ValueError):
        return False
    return names <= listed


class WriteFile(Protocol):
    def __call__(self, store: Store, desc: Descriptor, out_path: Path, /) -> object: ...




class ZipArchiveFormat:
    """A kind that is one zip file (Carton, MLSteam): known by the entries its central directory
    lists, exported whole through the pull cache (no file picking, no progress bar of its own).
    A kind gives its name, :meth:`members` and :meth:`writer`, and reads its own files."""

    name: ClassVar[str]
    picks_files: ClassVar[bool] = False
    shows_progress: ClassVar[bool] = False

    def members(self) -> tuple[set[str], Callable[[Path], list[ZipMember]]]:
        """The entries every file of the kind lists, and its reader of a zip's central directory."""
        raise NotImplementedError

    def writer(self) -> WriteFile:
        """What writes the file of an artifact (``export_file``'s ``write``)."""
        raise NotImplementedError

    def sniff(self, path: Path) -> bool:
        names, scan = self.members()
        return zip_lists(path, names, scan)

    def export(self, store: Store, desc: Descriptor, dest: str, request: ExportRequest) -> PullResult:
        return export_file(store, desc, dest, request, self.name, self.writer())
