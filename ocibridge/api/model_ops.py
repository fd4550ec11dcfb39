"""The Python API. The CLI only parses arguments and calls these functions.

    import ocibridge
    result = ocibridge.push("models/tiny", "oci:/srv/store:tiny")
    ocibridge.pull("oci:/srv/store:tiny", "out/")

The builder (and with it the ModelPack config model, pydantic) is imported by what builds:
``push``, and a ``pull`` that converts (an Ollama model). A pull of a ModelPack artifact into a
directory loads neither it nor any other format's or family's modules (their import was most of
a small pull's time).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.api.archive_out import archive_output, write_archive
from ocibridge.api.copy import copy_reference as copy_reference
from ocibridge.api.copy import pinned, wire_counts
from ocibridge.api.opening import open_at, open_read, refuse_bookkeeping, registry_options
from ocibridge.api.options import AttestOptions, PushOptions, SignOptions, push_options
from ocibridge.api.options import TransferOptions as TransferOptions  # public here too (docs/api.md)
from ocibridge.errors import UsageError
from ocibridge.kinds import dispatch
from ocibridge.oci.reference import LayoutReference, PathReference
from ocibridge.places.locate import Locator as Locator  # the type of what the calls take besides a text
from ocibridge.places.locate import Role, locate, on_registry, text_of
from ocibridge.places.targets import StoreTarget, closes_its_stores, default_store_path
from ocibridge.stores.base import Store
from ocibridge.transfer.progress import ProgressFn
from ocibridge.transfer.push_result import PushResult

if TYPE_CHECKING:
    from ocibridge.api.auth import login as login  # public here too (its home: api.auth)
    from ocibridge.api.auth import logout as logout
    from ocibridge.api.cache_ops import path as path  # public here too: ocibridge.path
    from ocibridge.api.pull_ops import PullDestination as PullDestination  # pull's home: api.pull_ops
    from ocibridge.api.pull_ops import pull as pull
    from ocibridge.api.pull_ops import pull_destination as pull_destination
    from ocibridge.api.scan_ops import DoorScan
    from ocibridge.kinds.source import SourceFormat
    from ocibridge.model.package import ModelPackage
    from ocibridge.oci.mediatypes import Kind


#: names public here too, loaded on first use: a pull needs neither login's modules (the
#: results of every other call) nor the model cache's (the Hugging Face cache's reader), and a
#: push not pull's (its policy check, its cache of pulled files): imports precede a push's first byte
_ELSEWHERE = {"login": "ocibridge.api.auth", "logout": "ocibridge.api.auth", "path": "ocibridge.api.cache_ops",
              "pull": "ocibridge.api.pull_ops", "pull_destination": "ocibridge.api.pull_ops",
              "PullDestination": "ocibridge.api.pull_ops"}


def __getattr__(name: str) -> Any:
    home = _ELSEWHERE.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def load_source(
    source: str | Locator,
    *,
    format: str | None = None,
    kind_overrides: Sequence[tuple[str, Kind]] = (),
    excludes: tuple[str, ...] = (),
    name: str | None = None,
    transfer: TransferOptions | None = None,
    build_file: str | None = None,
    use_build_file: bool = True,
) -> ModelPackage:
    """Read any supported source into a neutral model package: the table of kinds
    (ocibridge/kinds/table.py) says which reader. ``build_file``: a Modelfile or a Kitfile
    naming the files of the directory ``source`` (kinds/buildfile.py); without one, a
    ``Kitfile`` or ``Modelfile`` at the top of the directory is used, as kit and modctl do,
    unless ``use_build_file`` is False."""
    from ocibridge.kinds import buildfile
    from ocibridge.model import metadata

    located = locate(source, Role.SOURCE)
    source = text_of(located)
    fmt = dispatch.source_format(source, format)
    if build_file is not None:
        package = buildfile.read_build_file(build_file, source, excludes=excludes, name=name)
        metadata.fill(package)
        return package
    found = buildfile.default_build_file(source) if use_build_file and fmt.name == "directory" else None
    if found is not None:
        package = buildfile.read_default_build_file(found, source, excludes=excludes, name=name)
        metadata.fill(package)
        return package
    request = dispatch.ReadRequest(kind_overrides, excludes, name, registry_options(transfer),
                               None if isinstance(located, PathReference) else located)
    package = fmt.read(source, request)
    if name:
        package.descriptor["name"] = name
    return package


def local_name(package: ModelPackage) -> tuple[str, str]:
    """NAME and TAG of a model pushed into the local store without a name: the model's name
    (a directory's by default) and version (``latest`` without one), made to fit the grammars."""
    from ocibridge.stores.local_names import sanitized

    version = package.descriptor.get("version")
    return sanitized(package.name or "model", str(version) if version else "latest")


def _local_dest(dest: str | Locator | None, package: ModelPackage | None = None) -> Locator | None:
    """A push's DEST in the local store, as Docker reads it: no scheme and no registry host is a
    local ``NAME[:TAG]`` (``ubuntu``; ``docker.io/library/ubuntu`` is Docker Hub's); no DEST is
    the model's own name (:func:`local_name`). None: DEST names another store."""
    from ocibridge.stores.local_names import split_local_name, stored_name

    if package is not None:
        named: tuple[str, str] | None = local_name(package)
    elif isinstance(dest, str):
        named = split_local_name(dest)
    else:
        named = None
    if named is None:
        return None
    return LayoutReference(str(default_store_path()), stored_name(*named))


def _say_path_wins(source: str) -> None:
    """A push reads an existing path even when the local store holds a model of that name:
    said, since every other command would read the stored model."""
    from ocibridge.core import notices
    from ocibridge.places.targets import local_store_reference

    held = local_store_reference(source)
    if held is not None:
        shown = held.tag if held.tag else held.digest
        notices.say(f"pushing the directory {source} (the local store also holds {shown})")


@closes_its_stores
def push(
    source: str | Locator,
    dest: str | Locator | None = None,
    *,
    options: PushOptions | None = None,
    transfer: TransferOptions | None = None,
    sign: SignOptions | None = None,
    attest: AttestOptions | None = None,
    progress: ProgressFn | None = None,
    **deprecated: Any,
) -> PushResult:
    """Convert ``source`` to a ModelPack artifact and store it at ``dest`` (default store if None).

    ``options`` (:class:`PushOptions`): what is built (format, family, metadata, layers, the
    chunk table bound for lazy reads, a directory's own OMS signature carried along);
    ``transfer``: how registries are reached. ``sign`` (:class:`SignOptions`: a key and the forms
    it makes) and ``attest`` add a signature and evidence (AI-BOM, provenance) to the pushed manifest in
    the same call, checked before a byte is sent and reported in the result's ``extra``
    (``signature``, ``signed``, ``evidence``). Push's former keyword arguments (``to=``,
    ``chunks=``, ...) still set the fields of ``options`` of the same meaning, with a
    DeprecationWarning, for one release.

    A store reference as source (``oci:…``, a registry) is copied as it is, unless it holds a
    model of a family a source format reads (an Ollama model): that is converted.
    """
    options = push_options(options, deprecated)
    transfer = transfer or TransferOptions()
    archive = archive_output(dest)  # out.carton: a file, not a model of the local store
    source_ref = locate(source, Role.SOURCE)  # located once each, here
    _refuse_chunks_for_store(source_ref, options)
    if archive is not None:
        if sign is not None or options.oms_signature is not None or (attest is not None and attest.wanted):
            raise UsageError(f"{dest}: an archive holds no signatures or evidence; push to a store to add them")
        return _push_archive(source_ref, archive, options, transfer)
    dest_ref = locate(dest, Role.DESTINATION) if dest is not None else None
    _refuse_layout_in_source(source_ref, dest_ref)
    refuse_bookkeeping(dest_ref)
    signature = evidence = None
    signing = sign is not None or options.oms_signature is not None
    if signing or (attest is not None and attest.wanted):  # checked before a byte is sent
        from ocibridge.api import evidence as evidence_api

        signature = evidence_api.prepare_signature(sign, options.oms_signature, source_ref) if signing else None
        evidence = evidence_api.prepare(attest, dest_ref) if attest is not None and attest.wanted else None
        if signature is not None and signature.excludes:
            options = dataclasses.replace(options, excludes=options.excludes + signature.excludes)
    door = _scan_before_push(source_ref, options)  # refuses before a byte is sent
    result = _push(source_ref, dest_ref, options, transfer, progress)
    if door is not None:
        from ocibridge.api.scan_ops import attach_after_push

        result = dataclasses.replace(result, extra={**result.extra, "scan": attach_after_push(
            door, dest_ref, result.descriptor.digest, transfer)})
    if signature is None and evidence is None:
        return result
    return evidence_api.after_push(result, dest_ref, source_ref, dest_ref, transfer, evidence=evidence,
                                   signature=signature)


def _scan_before_push(source_ref: Locator, options: PushOptions) -> DoorScan | None:
    """The scan ``--scan`` asks for; none unasked, where the scanner's modules are not loaded."""
    if options.scan == "off" and options.scan_key is None:
        return None
    from ocibridge.api.scan_ops import scan_before_push

    return scan_before_push(source_ref, options.scan, options.scan_key)


def _refuse_chunks_for_store(source_ref: Locator, options: PushOptions) -> None:
    """A store's artifact is pushed with the layers it has (copied as it is, or an Ollama
    model's blobs converted with their digests): push builds no chunk table for it, so its
    chunk settings would be dropped without a word. Refused before anything is opened."""
    from ocibridge.chunks.choice import ChunkChoice, refuse_for_stored

    asked = ChunkChoice(options.chunks, options.chunk_threshold, options.chunk_hash, options.chunk_size)
    if asked != ChunkChoice() and dispatch.is_store(source_ref):
        raise refuse_for_stored(text_of(source_ref), "push takes a stored artifact's layers as they are, "
                                "with their digests and any chunk table", "a model push builds from files "
                                "(a directory, a file, hf:ORG/NAME)")


def _refuse_layout_in_source(source_ref: Locator, dest_ref: Locator | None) -> None:
    """A layout written into the directory being pushed becomes part of that model: its next
    push packs the layout's blobs too (``push tiny oci:tiny:v1``, where ``tiny:v1`` was meant)."""
    if not isinstance(source_ref, PathReference) or not isinstance(dest_ref, LayoutReference):
        return
    source = Path(source_ref.path).expanduser().resolve()
    if source_ref.path and source.is_dir() and Path(dest_ref.path).expanduser().resolve().is_relative_to(source):
        raise UsageError(f"{text_of(dest_ref)}: this layout is in {source_ref.path}, the directory being pushed, "
                         "and would become part of the model; write it outside (oci:PATH[:TAG]), or name "
                         "NAME:TAG for the local store")


def _push_archive(source_ref: Locator, archive: tuple[PathReference, SourceFormat], options: PushOptions,
                  transfer: TransferOptions) -> PushResult:
    """``push SOURCE out.carton``: the artifact a push builds, written as that archive."""
    from ocibridge.model.builder import ARTIFACT_TAG, BuildOptions, PlannedArtifact

    if options.to not in (None, "modelpack"):
        raise UsageError(f"{text_of(archive[0])}: an archive holds a ModelPack model; --to {options.to} "
                         "writes a store (oci:PATH:TAG, host/repo:tag or NAME:TAG)")
    if dispatch.is_store(source_ref):  # a model of a store: as it is
        from ocibridge.model.extract import resolve_model

        source = open_read(source_ref, transfer)
        return write_archive(archive, source.store, resolve_model(source.store, source.reference), transfer)
    package = load_source(source_ref, format=options.format, kind_overrides=options.kind_overrides,
                          excludes=options.excludes, name=options.name, transfer=transfer,
                          build_file=options.build_file, use_build_file=options.use_build_file)
    if options.overrides:
        from ocibridge.kinds.push import apply_to_package

        apply_to_package(package, dict(options.overrides))
    artifact = PlannedArtifact(package, options.build or BuildOptions(), None)
    return write_archive(archive, artifact, artifact.resolve(ARTIFACT_TAG), transfer)


def _push(source_ref: Locator, dest_ref: Locator | None, options: PushOptions, transfer: TransferOptions,
          progress: ProgressFn | None) -> PushResult:
    from ocibridge.chunks.choice import ChunkChoice
    from ocibridge.model.builder import BuildOptions, PlannedArtifact, plan_layers
    from ocibridge.model.deliver import deliver
    from ocibridge.transfer.progress_events import PushProgress

    origin: StoreTarget | None = None
    kind_overrides, excludes, name, to = options.kind_overrides, options.excludes, options.name, options.to
    if isinstance(source_ref, PathReference):
        _say_path_wins(source_ref.path)
    if dispatch.is_store(source_ref):
        # An artifact of a family a source format reads (an Ollama model) is converted, unless
        # the destination is that format's own; anything else is copied as it is.
        origin = open_at(source_ref, transfer)
        into = dispatch.destination_format(dest_ref) if dest_ref is not None else None
        conversion = dispatch.examine(origin.store, origin.reference, into, source=source_ref,
                                  refuse_other=False).conversion  # anything else: copied as it is
        if conversion is None or conversion.as_is:
            if dest_ref is None:
                raise UsageError("copying from a store needs a destination")
            return copy_reference(source_ref, dest_ref, transfer=transfer, progress=progress)
        request = dispatch.ReadRequest(kind_overrides, excludes, name, transfer.registry_options(), source_ref)
        package = conversion.format.read_artifact(origin.store, conversion.reference, request)
        if name:
            package.descriptor["name"] = name
    else:
        package = load_source(
            source_ref,
            format=options.format,
            kind_overrides=kind_overrides,
            excludes=excludes,
            name=name,
            transfer=transfer,
            build_file=options.build_file,
            use_build_file=options.use_build_file,
        )
    build_options = options.build or BuildOptions()
    # a table of files read here; a model read from a store would be downloaded once more for it
    policy = ChunkChoice(options.chunks, options.chunk_threshold, options.chunk_hash, options.chunk_size).policy() \
        if origin is None else None
    if options.overrides or to not in (None, "modelpack"):
        from ocibridge.kinds.push import apply_to_package

        apply_to_package(package, dict(options.overrides))
    if dest_ref is None:  # named after the overrides: ``--version 2.0`` tags NAME:2.0
        dest_ref = _local_dest(None, package)
    assert dest_ref is not None
    if to not in (None, "modelpack"):
        from ocibridge.kinds.push import push_family

        return push_family(package, build_options, dest_ref, to, registry_options=transfer.registry_options(),
                           concurrency=transfer.concurrency, progress=progress, chunks=policy)
    target = open_at(dest_ref, transfer, for_write=True)
    mounts: dict[str, Store] = {}
    if origin is not None and conversion is not None and on_registry(source_ref):
        # The converted model's blobs keep their digests: mount them within the registry
        # instead of re-sending them.
        mounts = conversion.format.mount_sources(origin.store, conversion.reference)
    # the artifact as a read-only store: new files are sent while hashed (one read per byte),
    # the rest of the graph is the one copy's, which counts everything
    artifact = PlannedArtifact(package, build_options, policy)
    shown = PushProgress(progress, [layer.progress_key() for layer in plan_layers(package, build_options)]) \
        if progress else None
    delivered = deliver(artifact, target.store, target.tag, concurrency=transfer.concurrency, mounts=mounts,
                        progress=shown.copy_progress(lambda: artifact.artifact().manifest) if shown else None)
    result = PushResult(pinned(target, delivered.descriptor), delivered.descriptor, delivered.stats,
                        wire_counts(target.store))
    if delivered.chunks:
        result.extra["chunks"] = dict(delivered.chunks)
    return result
