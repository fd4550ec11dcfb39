"""The API's copy between stores (``copy_reference``), apart from :mod:`ocibridge.api.model_ops`:
``ocibridge copy`` then loads neither the build, extract and format modules of the other
commands nor pydantic (their import was a third of a copy's time within one registry), and the
evidence code only when asked to attach some. :mod:`ocibridge.api.model_ops` re-exports it;
``TransferOptions`` (:mod:`ocibridge.api.options`) is re-exported here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ocibridge.api.missing import explaining_missing
from ocibridge.api.opening import locate_destination, open_at, open_checked
from ocibridge.api.options import TransferOptions as TransferOptions  # public here too (its home before)
from ocibridge.chunks.choice import refuse_for_stored
from ocibridge.errors import UsageError
from ocibridge.oci.models import Descriptor
from ocibridge.places.locate import Locator, Role, locate, text_of
from ocibridge.places.locators import KindPlace
from ocibridge.places.targets import SourceTarget, StoreTarget, closes_its_stores
from ocibridge.transfer.copy import Companions, CopyHooks, copy
from ocibridge.transfer.copy import CopyStats as CopyStats  # what a result's ``stats`` is, for the command
from ocibridge.transfer.push_result import PushResult

if TYPE_CHECKING:
    from ocibridge.api.options import AttestOptions
    from ocibridge.api.policy import Verification
    from ocibridge.chunks.choice import ChunkChoice
    from ocibridge.stores.base import Store
    from ocibridge.transfer.progress import ProgressFn


def pinned(target: SourceTarget, desc: Descriptor) -> str:
    text = target.text.split("@", 1)[0]
    return f"{text}@{desc.digest}"


@explaining_missing
@closes_its_stores
def copy_reference(
    src: str | Locator,
    dst: str | Locator,
    *,
    referrers: bool = False,
    transfer: TransferOptions | None = None,
    progress: ProgressFn | None = None,
    verify: Verification | None = None,
    attest: AttestOptions | None = None,
    chunks: ChunkChoice | None = None,
) -> PushResult:
    """Copy an artifact (with its whole graph) between any two stores; with ``verify``, only
    a signed one (checked before anything is written); the containers policy file that applies
    is obeyed in every case. ``attest``: the evidence to attach to the copy (the provenance
    names the source manifest, by digest), reported in ``extra["evidence"]``. ``chunks``:
    push's chunk settings for the artifact an ``hf:ORG/NAME`` source is built into (None: its
    defaults); refused for a store's artifact, copied byte for byte. Each reference is located
    once, here."""
    transfer = transfer or TransferOptions()
    from ocibridge.api.archive_out import archive_output

    archive = archive_output(dst)  # out.carton: a file, not a model of the local store
    src_ref = locate(src, Role.MODEL)
    dst_ref = archive[0] if archive is not None else locate_destination(dst)
    src_text = text_of(src_ref)
    if chunks is not None and not (isinstance(src_ref, KindPlace) and not src_ref.is_store):
        raise refuse_for_stored(src_text, "copy keeps a stored artifact's bytes and digest, its chunk table with them",
                                "an hf:ORG/NAME source, which copy builds")
    if archive is not None and (referrers or (attest is not None and attest.wanted)):
        raise UsageError(f"{dst}: an archive holds no signatures or evidence; copy to a store to keep them")
    evidence = None
    if attest is not None and attest.wanted:  # the key and the BOM's library, before a byte is sent
        from ocibridge.api import evidence as evidence_api

        evidence = evidence_api.prepare(attest, dst_ref)
    if verify is not None and isinstance(src_ref, KindPlace) and not src_ref.holds_referrers \
            and not src_ref.is_store:
        raise UsageError(f"{src_text}: --verify-key checks a store's signatures; the Hugging Face cache has none")
    # hf:ORG/NAME opens as the artifact a push of it builds (its kind's opener)
    source = open_checked(src_ref, verify, transfer, kind_places=True, chunks=chunks)
    source_store, source_reference = source.store, source.reference
    if archive is not None:
        from ocibridge.api.archive_out import write_archive
        from ocibridge.model.extract import resolve_model

        return write_archive(archive, source_store, resolve_model(source_store, source_reference), transfer)
    target = open_at(dst_ref, transfer, for_write=True)
    if isinstance(src_ref, KindPlace) and not src_ref.is_store:
        result = _deliver_built(source_store, target, transfer, progress)
    else:
        stats = copy(
            source_store,
            source_reference,
            target.store,
            target.tag,
            concurrency=transfer.concurrency,
            referrers=referrers,
            progress=progress,
            hooks=CopyHooks(undo_on_failure=True, companions=_signature_companions() if referrers else None),
        )
        assert stats.root is not None
        result = PushResult(pinned(target, stats.root), stats.root, stats, wire_counts(target.store))
    if evidence is None:
        return result
    # a copy is byte for byte: the source manifest is the one written
    attached = evidence_api.attach_from_source(evidence, "copy", src_ref, dst_ref, result.descriptor.digest,
                                               result.descriptor, transfer)
    return evidence_api.with_extra(result, evidence=attached)


def _deliver_built(built: Store, target: StoreTarget, transfer: TransferOptions,
                   progress: ProgressFn | None) -> PushResult:
    """A kind's place read as the artifact a push of it builds (``hf:ORG/NAME``), written as
    push writes it (model/deliver.py): the same copy, then the chunk table its manifest binds
    attached as a referrer, so the copy is push's artifact in full, not its manifest alone
    (docs/using.md). It has no referrers of its own for ``-r`` to carry."""
    from ocibridge.model.builder import PlannedArtifact
    from ocibridge.model.deliver import deliver

    assert isinstance(built, PlannedArtifact)  # what a kind's opener builds (kinds/hf/artifact.py)
    delivered = deliver(built, target.store, target.tag, concurrency=transfer.concurrency, progress=progress)
    result = PushResult(pinned(target, delivered.descriptor), delivered.descriptor, delivered.stats,
                        wire_counts(target.store))
    if delivered.chunks:
        result.extra["chunks"] = dict(delivered.chunks)
    return result


def wire_counts(store: object) -> dict[str, int]:
    """What went to a registry over the wire beside the copy's own counts (``bytesCopied`` is
    every blob copied, whole): the blob bytes really sent (a retry's again) and those an
    upload continued from, sent by an earlier run. Empty for a store that keeps no such count."""
    from ocibridge.stores.base import CountsUploads

    if not isinstance(store, CountsUploads):
        return {}
    return {"bytesSent": store.stats.bytes_uploaded, "bytesResumed": store.stats.bytes_resumed}


def _signature_companions() -> Companions:
    """Signatures travel with a copy that takes referrers (imported only then: ~15 ms)."""
    from ocibridge.signing.attach import SignatureCompanions

    return SignatureCompanions()
