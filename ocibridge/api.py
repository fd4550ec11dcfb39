"""The Python API. The CLI only parses arguments and calls these functions.

    import ocibridge
    result = ocibridge.push("models/tiny", "oci:/srv/store:tiny")
    ocibridge.pull("oci:/srv/store:tiny", "out/")
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .copy import DEFAULT_CONCURRENCY, CopyStats, copy
from .errors import NotFound, OcibridgeError, SourceError, UsageError
from .formats.directory import read_directory
from .modelpack import digestcache
from .modelpack.builder import ARTIFACT_TAG, BuildOptions, build, plan_layers
from .modelpack.extract import ExtractResult, extract, resolve_model
from .modelpack.inspect import inspect as inspect_artifact
from .modelpack.package import ModelPackage
from .modelpack.validate import validate as validate_artifact
from .oci.mediatypes import Kind, Variant
from .oci.models import Descriptor
from .overwrite import OnExisting
from .pathfilter import PathFilter
from .progress import ProgressFn, counting
from .progress_events import PushProgress, file_key
from .pullcache import cached_pull
from .results import InspectResult, LoginResult, PullResult, ValidateResult
from .stores.base import can_ingest
from .targets import (
    StoreTarget,
    archive_format,
    default_store_path,
    is_store_reference,
    open_store_target,
)

if TYPE_CHECKING:
    from .signing.verify import VerifyPolicy


@dataclass
class TransferOptions:
    """How to reach registries and how hard to push; passed to every store that is opened."""

    concurrency: int = DEFAULT_CONCURRENCY
    plain_http: bool = False
    insecure: bool = False
    ca_file: str | None = None
    username: str | None = None
    password: str | None = None
    chunk_size: int | None = None
    authfile: str | None = None  # read before the docker config and containers' auth.json
    part_size: int | None = None  # ranged pulls: bytes per part
    parts_in_flight: int | None = None  # ranged pulls: parts at once per blob
    limit_rate: int | None = None  # bytes per second over every transfer

    def registry_options(self) -> dict[str, Any]:
        opts = {
            "authfile": self.authfile,
            "plain_http": self.plain_http,
            "insecure": self.insecure,
            "ca_file": self.ca_file,
            "username": self.username,
            "password": self.password,
            "chunk_size": self.chunk_size,
            "part_size": self.part_size,
            "parts_in_flight": self.parts_in_flight,
            "limit_rate": self.limit_rate,
        }
        return {k: v for k, v in opts.items() if v not in (None, False)}


@dataclass(frozen=True)
class PushResult:
    """What ``push``/``copy_reference`` stored: ``reference`` is pinned by digest."""

    reference: str
    descriptor: Descriptor
    stats: CopyStats
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, **self.stats.as_dict(), **self.extra}


def load_source(
    source: str,
    *,
    format: str | None = None,
    kind_overrides: Sequence[tuple[str, Kind]] = (),
    excludes: tuple[str, ...] = (),
    name: str | None = None,
    transfer: TransferOptions | None = None,
    build_file: str | None = None,
) -> ModelPackage:
    """Read any supported source into a neutral model package. ``build_file``: a Modelfile or
    a Kitfile naming the files of the directory ``source`` (formats/buildfile.py)."""
    fmt = archive_format(source, format)
    if build_file is not None:
        from .formats.buildfile import read_build_file
        from .modelpack import metadata

        package = read_build_file(build_file, source, excludes=excludes, name=name)
        metadata.fill(package)
        return package
    if fmt == "carton":
        from .formats.carton import read_carton

        package = read_carton(_existing_file(source))
    elif fmt == "mlarchive":
        from .formats.mlsteam import read_mlarchive

        package = read_mlarchive(_existing_file(source))
    elif source.startswith("ollama:"):
        from .formats.ollama import read_ollama

        origin = open_store_target(source, **(transfer or TransferOptions()).registry_options())
        package = read_ollama(origin.store, origin.reference)
    elif fmt in (None, "directory"):
        from .modelpack import metadata

        package = read_directory(source, overrides=kind_overrides, excludes=excludes, name=name)
        metadata.fill(package)  # architecture, family, precision, paramSize from the files
    else:
        raise SourceError(f"unknown source format {fmt!r}")
    if name:
        package.descriptor["name"] = name
    return package


def _existing_file(path: str) -> Path:
    p = Path(path)
    if not p.is_file():
        raise SourceError(f"{path}: no such file")
    return p


def default_tag(package: ModelPackage) -> str:
    """A tag for the default store, from the model's name and version."""
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", package.name or "model").strip(".-") or "model"
    version = package.descriptor.get("version")
    if version:
        base += "-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", str(version))
    return base[:128]


def push(
    source: str,
    dest: str | None = None,
    *,
    build_options: BuildOptions | None = None,
    transfer: TransferOptions | None = None,
    format: str | None = None,
    kind_overrides: Sequence[tuple[str, Kind]] = (),
    excludes: tuple[str, ...] = (),
    name: str | None = None,
    progress: ProgressFn | None = None,
    to: str | None = None,
    overrides: dict[str, str] | None = None,
    build_file: str | None = None,
) -> PushResult:
    """Convert ``source`` to a ModelPack artifact and store it at ``dest`` (default store if None).

    A store reference as source (``oci:…``, a registry) is copied as it is. ``to`` writes
    another model family (``modelkit``, ``docker-model``; see ocibridge.families);
    ``overrides`` sets descriptor/config fields (``{"arch": "llama", ...}``).
    """
    transfer = transfer or TransferOptions()
    ollama_to_ollama = source.startswith("ollama:") and (dest or "").startswith("ollama:")
    if is_store_reference(source) and (not source.startswith("ollama:") or ollama_to_ollama):
        if dest is None:
            raise UsageError("copying from a store needs a destination")
        return copy_reference(source, dest, transfer=transfer, progress=progress)
    package = load_source(
        source,
        format=format,
        kind_overrides=kind_overrides,
        excludes=excludes,
        name=name,
        transfer=transfer,
        build_file=build_file,
    )
    build_options = build_options or BuildOptions()
    if dest is None:
        dest = f"oci:{default_store_path()}:{default_tag(package)}"
    if overrides or to not in (None, "modelpack"):
        from .families.push import apply_to_package, push_family

        apply_to_package(package, overrides or {})
        if to not in (None, "modelpack"):
            return push_family(package, build_options, dest, to, registry_options=transfer.registry_options(),
                               concurrency=transfer.concurrency, progress=progress)
    target = open_store_target(dest, for_write=True, **transfer.registry_options())
    if source.startswith("ollama://"):
        # Ollama blobs keep their digests: mount them within the registry instead of re-sending.
        from .formats.ollama import premount

        origin = open_store_target(source, **transfer.registry_options())
        premounted = premount(origin.store, origin.reference, target.store)
    else:
        premounted = 0
    shown = PushProgress(progress, plan_layers(package, build_options)) if progress else None
    with _undone_on_failure(target.store):
        ingested = _ingest_new_files(package, build_options, target, transfer.concurrency, progress)
        artifact = build(package, build_options)
        stats = copy(
            artifact,
            ARTIFACT_TAG,
            target.store,
            target.tag,
            concurrency=transfer.concurrency,
            progress=shown.copy_progress(artifact.manifest) if shown else None,
        )
    # The copy found the ingested blobs present: count each once as copied, not skipped. Files
    # with equal content are one blob, and a concurrent push may have sent a blob first, so the
    # counts are clamped by what the copy really skipped (never below zero).
    sent = min(len(ingested.ingested), stats.blobs_skipped)
    stats.add(blobs_copied=sent, bytes_copied=ingested.bytes_copied)
    stats.blobs_skipped -= sent
    premounted = max(0, min(premounted, stats.blobs_skipped))  # the copy then found them present
    stats.add(blobs_mounted=premounted)
    stats.blobs_skipped -= premounted
    return PushResult(_pinned(target, artifact.descriptor), artifact.descriptor, stats)


def _undone_on_failure(store: object) -> AbstractContextManager[None]:
    """A failed push into a layout takes back the blobs it added that nothing uses. A registry
    offers no such guarantee: a blob may be shared by other manifests of the repository (or
    others, through mounts) and many registries refuse DELETE, so uploaded blobs stay there,
    unreferenced, until the registry's garbage collection."""
    undo = getattr(store, "removing_new_blobs_on_failure", None)
    return undo() if undo is not None else nullcontext()


def _tag_exists(target: StoreTarget) -> bool:
    if target.tag is None:
        return True
    try:
        target.store.resolve(target.tag)
    except NotFound:
        return False
    return True


@dataclass
class _Ingested(CopyStats):
    ingested: set[str] = field(default_factory=set)  # digests sent by ingest


def _progress_key(path: str, size: int) -> Descriptor:
    """A stand-in descriptor for the progress display while a file's digest is unknown: it
    carries the file's path (see :mod:`ocibridge.progress_events`)."""
    return file_key(path, size)


def _ingest_new_files(
    package: ModelPackage,
    options: BuildOptions,
    target: StoreTarget,
    concurrency: int,
    progress: ProgressFn | None,
) -> _Ingested:
    """Upload raw files whose digest nobody knows yet while hashing them: one read per byte.

    Only for a new tag: when the tag exists (a re-push or an update) files are hashed first so
    that blobs the destination already holds are skipped by a HEAD instead of re-sent.
    """
    stats = _Ingested()
    if not can_ingest(target.store) or _tag_exists(target):
        return stats
    pending = [
        layer.files[0]
        for layer in plan_layers(package, options)
        if layer.variant is Variant.RAW and layer.files[0].digest is None
    ]

    keys = {id(f): _progress_key(f.path, f.size) for f in pending}
    if progress:
        for key in keys.values():
            progress("plan", key, 0)

    def ingest(f) -> None:
        key = keys[id(f)]

        def reopen() -> BinaryIO:
            return counting(f.open(), key, progress)

        kwargs = {"reopen": reopen} if getattr(target.store, "accepts_reopen", False) else {}
        with reopen() as reader:
            digest, size = target.store.ingest_blob(reader, **kwargs)  # type: ignore[attr-defined]  # probed by the caller; a named capability is issue 15
        if size != f.size:
            raise SourceError(f"{f.path}: size changed while reading ({f.size} → {size})")
        f.digest = digest
        if f.source_path is not None:
            digestcache.remember(f.source_path, digest)
        stats.add(blobs_copied=1, bytes_copied=size)
        stats.ingested.add(digest)
        if progress:
            progress("done", key, size)

    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="ingest") as pool:
        for future in [pool.submit(ingest, f) for f in pending]:
            future.result()
    return stats


def _pinned(target: StoreTarget, desc: Descriptor) -> str:
    text = target.text.split("@", 1)[0]
    return f"{text}@{desc.digest}"


def copy_reference(
    src: str,
    dst: str,
    *,
    referrers: bool = False,
    transfer: TransferOptions | None = None,
    progress: ProgressFn | None = None,
    verify: VerifyPolicy | None = None,
) -> PushResult:
    """Copy an artifact (with its whole graph) between any two stores; with ``verify``, only
    a signed one (checked before anything is written)."""
    transfer = transfer or TransferOptions()
    options = transfer.registry_options()
    source = open_store_target(src, **options)
    if verify is not None:
        source.reference = _verified(source, verify, src)
    target = open_store_target(dst, for_write=True, **options)
    with _undone_on_failure(target.store):
        stats = copy(
            source.store,
            source.reference,
            target.store,
            target.tag,
            concurrency=transfer.concurrency,
            referrers=referrers,
            progress=progress,
        )
    assert stats.root is not None
    return PushResult(_pinned(target, stats.root), stats.root, stats)


def pull(
    src: str,
    dest: str,
    *,
    format: str | None = None,
    transfer: TransferOptions | None = None,
    progress: ProgressFn | None = None,
    verify: VerifyPolicy | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    on_existing: OnExisting | str = OnExisting.REFUSE,
) -> PullResult:
    """Bring an artifact back: into a directory, an archive (.carton/.mlarchive), an Ollama
    store, or another store (which is a copy). With ``verify``, only a signed one.

    Into a directory: ``include``/``exclude`` globs pick the files (unselected raw layers are
    not fetched); a file already there with other content is refused (``on_existing="refuse"``,
    nothing written), replaced (``"overwrite"``) or kept (``"keep"``)."""
    transfer = transfer or TransferOptions()
    options = transfer.registry_options()
    fmt = archive_format(dest, format)
    select = PathFilter.of(include, exclude)
    if fmt is None and is_store_reference(dest) and not dest.startswith("ollama:"):
        _whole_artifact_only(select, dest)
        copied = copy_reference(src, dest, transfer=transfer, progress=progress, verify=verify)
        return PullResult(copied.descriptor.digest, copied.reference, "store", copy=copied.as_dict())
    if fmt is not None or dest.startswith("ollama:"):
        _whole_artifact_only(select, dest)
    source = open_store_target(src, **options)
    if verify is not None:
        source.reference = _verified(source, verify, src)
    # an index with one ModelPack entry (k8s modelcar --index) is pulled as that entry
    # a ModelKit, a Docker model...: pulled as its ModelPack form (families/pull.py)
    from .families.pull import as_modelpack

    model = None if src.startswith("ollama:") else as_modelpack(source.store, source.reference)
    store, desc = model or (source.store, resolve_model(source.store, source.reference))
    if src.startswith("ollama:") and not dest.startswith("ollama:"):
        # An Ollama model is converted as push would convert it, so its files can be pulled.
        from .formats.ollama import read_ollama

        store = build(read_ollama(source.store, source.reference))
        desc = store.descriptor
    if fmt == "carton":
        from .formats.carton import export_carton

        with cached_pull(store, None, progress) as cached:  # resumable across runs
            export_carton(cached, desc, Path(dest))
        return PullResult(desc.digest, dest, "carton")
    if fmt == "mlarchive":
        from .formats.mlsteam import export_mlarchive

        with cached_pull(store, None, progress) as cached:
            export_mlarchive(cached, desc, Path(dest))
        return PullResult(desc.digest, dest, "mlarchive")
    if dest.startswith("ollama:"):
        from .formats.ollama import export_ollama

        target = open_store_target(dest, for_write=True, **options)
        export_ollama(store, desc, target)
        return PullResult(desc.digest, dest, "ollama")
    if fmt not in (None, "directory"):
        raise OcibridgeError(f"unknown output format {fmt!r}")
    # resumable across runs, and files already in DEST with the right digest are not fetched
    with cached_pull(store, Path(dest), progress) as cached:
        result: ExtractResult = extract(
            cached, desc.digest, dest, concurrency=transfer.concurrency, progress=progress,
            select=select, on_existing=OnExisting(on_existing))
    return PullResult(desc.digest, dest, "directory", tuple(result.files), result.bytes_written,
                      kept=tuple(result.kept), skipped=tuple(sorted(result.skipped)))


def _verified(source: StoreTarget, policy: VerifyPolicy, name: str) -> str:
    """The digest ``source`` names, once a signature of it verifies (raises otherwise): what
    is used next is pinned to what was verified."""
    from .signing.policy import verify_before_use

    desc = source.store.resolve(source.reference)
    verify_before_use(source.store, desc, policy, name=name)
    return desc.digest


def _whole_artifact_only(select: PathFilter | None, dest: str) -> None:
    if select is not None:
        raise UsageError(f"--include/--exclude pick files of a pull into a directory, not into {dest}")


def inspect(ref: str, *, transfer: TransferOptions | None = None) -> InspectResult:
    target = open_store_target(ref, **(transfer or TransferOptions()).registry_options())
    info = inspect_artifact(target.store, target.reference)
    info["reference"] = ref
    return InspectResult(ref, info["digest"], info["mediaType"], info.get("artifactType"), info["size"],
                         tuple(info["layers"]), info.get("config"), info)


def validate(ref: str, *, transfer: TransferOptions | None = None, strict: bool = False,
             warnings: list[str] | None = None) -> ValidateResult:
    """Raise :class:`ocibridge.errors.ValidationError` listing every broken rule of the
    model-spec. Runtime readiness (CRI-O file names, containerd) is reported in the result's
    ``warnings`` (and into ``warnings`` when given, also when invalid); ``strict`` makes it errors."""
    found: list[str] = [] if warnings is None else warnings
    target = open_store_target(ref, **(transfer or TransferOptions()).registry_options())
    desc = validate_artifact(target.store, target.reference, strict=strict, warnings=found)
    return ValidateResult(ref, desc, tuple(found))


def tags(ref: str, *, transfer: TransferOptions | None = None) -> list[str]:
    target = open_store_target(ref, **(transfer or TransferOptions()).registry_options())
    return target.store.tags()


def login(host: str, username: str, password: str, *, transfer: TransferOptions | None = None) -> LoginResult:
    """Check the credentials against ``host`` and store them in the docker config (credential
    helpers honoured), as ``ocibridge login`` does."""
    from .stores.registry.credentials import login as store_login

    opts = (transfer or TransferOptions()).registry_options()
    for key in ("username", "password", "chunk_size"):
        opts.pop(key, None)
    store_login(host, username, password, **opts)
    return LoginResult(host, username)


def logout(host: str) -> bool:
    """Forget the stored credentials of ``host``; False when there were none."""
    from .stores.registry.credentials import logout as store_logout

    return store_logout(host)
