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
from ocibridge.api.missing import explaining_missing
from ocibridge.api.opening import open_at, open_read, open_vouched, refuse_bookkeeping, registry_options
from ocibridge.api.options import AttestOptions, PullOptions, PushOptions, SignOptions, pull_options, push_options
from ocibridge.api.options import TransferOptions as TransferOptions  # public here too (docs/api.md)
from ocibridge.api.scan_ops import attach_after_push, scan_before_push
from ocibridge.core.overwrite import OnExisting
from ocibridge.core.pathfilter import PathFilter
from ocibridge.errors import UsageError
from ocibridge.kinds import dispatch
from ocibridge.model.extract import held_manifest, resolve_model
from ocibridge.oci.reference import LayoutReference, PathReference
from ocibridge.places.locate import Locator as Locator  # the type of what the calls take besides a text
from ocibridge.places.locate import Role, locate, on_registry, text_of
from ocibridge.places.targets import StoreTarget, closes_its_stores, default_store_path
from ocibridge.signing.use import as_use_policy
from ocibridge.stores.base import Store
from ocibridge.transfer.progress import ProgressFn
from ocibridge.transfer.pull_result import PullResult
from ocibridge.transfer.push_result import PushResult

if TYPE_CHECKING:
    from ocibridge.api.auth import login as login  # public here too (its home: api.auth)
    from ocibridge.api.auth import logout as logout
    from ocibridge.api.cache_ops import path as path  # public here too: ocibridge.path
    from ocibridge.api.policy import Verification
    from ocibridge.kinds.source import SourceFormat
    from ocibridge.model.package import ModelPackage
    from ocibridge.oci.mediatypes import Kind
    from ocibridge.signing.use import CheckedUse


#: names public here too, loaded on first use: a pull needs neither login's modules (the
#: results of every other call) nor the model cache's (the Hugging Face cache's reader)
_ELSEWHERE = {"login": "ocibridge.api.auth", "logout": "ocibridge.api.auth", "path": "ocibridge.api.cache_ops"}


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
    door = scan_before_push(source_ref, options.scan, options.scan_key)  # refuses before a byte is sent
    result = _push(source_ref, dest_ref, options, transfer, progress)
    if door is not None:
        result = dataclasses.replace(result, extra={**result.extra, "scan": attach_after_push(
            door, dest_ref, result.descriptor.digest, transfer)})
    if signature is None and evidence is None:
        return result
    return evidence_api.after_push(result, dest_ref, source_ref, dest_ref, transfer, evidence=evidence,
                                   signature=signature)


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


@dataclasses.dataclass(frozen=True)
class PullDestination:
    """Where a pull writes, located once (pass it to :func:`pull` as ``dest``), and whether a
    pull there reports progress (exports into an archive or the Ollama store report none yet)."""

    locator: Locator
    shows_progress: bool


def pull_destination(dest: str | Locator, format: str | None = None) -> PullDestination:
    """What a caller asks before drawing a bar for :func:`pull` into ``dest``."""
    located = locate(dest, Role.OUTPUT)
    return PullDestination(located, not dispatch.exports_quietly(located, format))


@explaining_missing
@closes_its_stores
def pull(
    src: str | Locator,
    dest: str | Locator | PullDestination,
    *,
    options: PullOptions | None = None,
    transfer: TransferOptions | None = None,
    progress: ProgressFn | None = None,
    verify: Verification | None = None,
    **deprecated: Any,
) -> PullResult:
    """Bring an artifact back: into a directory, an archive (.carton/.mlarchive), an Ollama
    store, or another store (which is a copy). With ``verify``, only a signed one.
    ``options`` (:class:`PullOptions`): what is written there; ``transfer``: how registries are
    reached. Pull's former keyword arguments (``format=``, ``include=``, ...) still set the
    fields of ``options`` of the same name, with a DeprecationWarning, for one release.

    ``with_signatures`` (into a directory): the artifact's OMS signature, chosen (and, with
    ``verify``, verified) before anything is written, goes beside the files as ``model.sig``
    once the files pulled are checked against it. ``with_attestations`` (into a directory): the
    manifest's attestations and evidence referrers go under ``.ocibridge/attestations/``
    (signing/attestation_files.py), each verified first when ``verify`` has keys.

    Into a directory: ``include``/``exclude`` globs pick the files (unselected raw layers are
    not fetched); a file already there with other content is refused (``on_existing="refuse"``,
    nothing written), replaced (``"overwrite"``) or kept (``"keep"``)."""
    pulling = pull_options(options, deprecated)
    format, on_existing = pulling.format, pulling.on_existing
    with_signatures, with_attestations = pulling.with_signatures, pulling.with_attestations
    transfer = transfer or TransferOptions()
    registry = transfer.registry_options()
    if isinstance(dest, PullDestination):  # located by pull_destination
        dest = dest.locator
    src_ref, dest_ref = locate(src, Role.MODEL), locate(dest, Role.OUTPUT)  # located once each, here
    dest = text_of(dest_ref)
    fmt = dispatch.destination_format(dest_ref, format)
    if fmt is not None and fmt.name == "directory":
        from ocibridge.core.parentdir import parent_must_exist

        parent_must_exist(dest, dest)
    select = PathFilter.of(pulling.include, pulling.exclude)
    if with_signatures and (fmt is None or fmt.name != "directory"):
        raise UsageError(f"--with-signatures writes model.sig beside pulled files, not into {dest}")
    if with_attestations and (fmt is None or fmt.name != "directory"):
        raise UsageError(f"--with-attestations writes attestations beside pulled files, not into {dest}"
                         " (copy -r carries them between stores)")
    if fmt is None:  # another store: a copy (which parses both references, once)
        _whole_artifact_only(select, dest)
        copied = copy_reference(src_ref, dest_ref, transfer=transfer, progress=progress, verify=verify)
        return PullResult(copied.descriptor.digest, copied.reference, "store", copy=copied.as_dict())
    if not fmt.picks_files:
        _whole_artifact_only(select, dest)
    source, checked = open_vouched(src_ref, verify, transfer, files_only=True, kind_places=True)  # check, then use
    oms = None
    if with_signatures:
        from ocibridge.signing.omstravel import choose_oms_signature

        signed = source.store.resolve(source.reference)
        source.reference = signed.digest  # the files pulled are those of the manifest the signature names
        oms = choose_oms_signature(source.store, signed, as_use_policy(verify).keys)
    attestations = None
    if with_attestations:  # read (and verified) before a file is written
        from ocibridge.signing import attestation_files

        subject = source.store.resolve(source.reference)
        source.reference = subject.digest  # the files pulled are those of the manifest attested
        attestations = attestation_files.collect(source.store, subject, as_use_policy(verify).keys,
                                                 text_of(src_ref))
        attestation_files.check_folder(Path(dest))
    examined = dispatch.examine(source.store, source.reference, fmt, source=src_ref)
    conversion = examined.conversion
    store: Store
    named: str | None = None  # the digest the user named, when the files come from another form
    in_hand = examined.files  # the manifest exported, read, checked and parsed once: handed down
    if conversion is not None and not conversion.as_is:
        # A model of a family a source format reads (an Ollama model) is converted as push
        # would convert it, so its files can be pulled.
        from ocibridge.model.builder import build

        reading = dispatch.ReadRequest(registry_options=registry)
        artifact = build(conversion.format.read_artifact(source.store, conversion.reference, reading))
        store, desc = artifact, artifact.descriptor
        in_hand = held_manifest(artifact, desc)
    elif conversion is not None:  # into the format's own kind (Ollama to Ollama): as it is
        store, desc = source.store, resolve_model(source.store, source.reference)
    elif examined.model is not None:
        # a ModelKit, a Docker model...: pulled as its ModelPack form (families/pull.py); an
        # index with one ModelPack entry (k8s modelcar --index) is pulled as that entry
        from ocibridge.kinds.pull import modelpack_of
        from ocibridge.oci.models import ManifestRead

        store, desc = modelpack_of(examined.model, source.store)
        named = examined.model.desc.digest
        found = examined.model
        same = store is source.store and desc.digest == found.desc.digest  # what the door read is exported
        in_hand = ManifestRead(found.desc, found.data, found.manifest) if same else held_manifest(store, desc)
    elif in_hand is not None:  # no model of a known family: a plain OCI artifact of files, as it is
        store, desc = source.store, in_hand.desc
    else:
        store, desc = source.store, resolve_model(source.store, source.reference)
    by_table = _table_may_check(checked, desc.digest, with_signatures)
    entry_digests = False
    if oms is not None:
        from ocibridge.signing.omstravel import landed_digests_wanted

        entry_digests = landed_digests_wanted(oms)
    request = dispatch.ExportRequest(registry, transfer.concurrency, progress, select, OnExisting(on_existing),
                                 dest_ref, manifest=in_hand, table_checks=by_table, entry_digests=entry_digests)
    pulled = fmt.export(store, desc, dest, request)
    if oms is not None:
        from ocibridge.signing.omstravel import write_beside

        # each file the pull checked as it landed is not read again (signing/omstravel.py)
        written = write_beside(oms, Path(dest), list(pulled.files), pulled.landed)
        pulled = dataclasses.replace(pulled, signature=str(written))
    if attestations is not None:
        from ocibridge.signing import attestation_files

        files, left_out = attestations
        pulled = dataclasses.replace(pulled, attestations=tuple(attestation_files.write(files, Path(dest))),
                                     attestations_left_out=left_out)
    if named is None or named == pulled.digest:
        return pulled
    return dataclasses.replace(pulled, digest=named, via=pulled.digest)


def _table_may_check(checked: CheckedUse, exported: str, with_signatures: bool) -> bool:
    """Whether a layer may be checked by the chunk table the exported manifest binds instead
    of its SHA-256 (transfer/tabledpull.py). A table vouches for nothing by itself: under a
    signature check only a signature of the manifest (classic, bundle) vouches for the table it
    binds, and only when the manifest exported is the one checked; a signature of the files
    (OMS) lists their SHA-256, and a look-alike manifest can bind a forged table beside it.
    With no check, the table is the manifest's word as the layer digests are, except under
    ``--with-signatures``: model.sig goes beside files checked by the digests it lists."""
    from ocibridge.signing.coverage import Trusted

    if not checked.checked:
        return not with_signatures
    return checked.vouches_for(Trusted.CHUNK_TABLE) and exported == checked.digest


def _whole_artifact_only(select: PathFilter | None, dest: str) -> None:
    if select is not None:
        raise UsageError(f"--include/--exclude pick files of a pull into a directory, not into {dest}")
