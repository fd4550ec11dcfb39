"""pull: an artifact back into a directory, an archive, an Ollama store or another store (a copy),
its signature and attestations beside the files when asked."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibridge.api.copy import copy_reference
from ocibridge.api.missing import explaining_missing
from ocibridge.api.opening import open_vouched
from ocibridge.api.options import PullOptions, TransferOptions, pull_options
from ocibridge.core.overwrite import OnExisting
from ocibridge.core.pathfilter import PathFilter
from ocibridge.errors import UsageError
from ocibridge.kinds import dispatch
from ocibridge.model.extract import held_manifest, resolve_model
from ocibridge.places.locate import Locator, Role, locate, text_of
from ocibridge.places.targets import closes_its_stores
from ocibridge.signing.use import as_use_policy
from ocibridge.stores.base import Store
from ocibridge.transfer.progress import ProgressFn
from ocibridge.transfer.pull_result import PullResult

if TYPE_CHECKING:
    from ocibridge.api.policy import Verification
    from ocibridge.signing.use import CheckedUse


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
