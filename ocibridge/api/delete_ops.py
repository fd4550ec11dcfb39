"""``ocibridge delete`` (oras ``manifest delete``) as an API call: a manifest and everything
that goes with it (its other tags, its referrers and theirs, its signatures' and attachments'
tags), refused unless ``force`` when that is more than the tag named.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ocibridge.api.model_ops import TransferOptions
from ocibridge.api.store_ops import open_store, rewrite_before, store_reference
from ocibridge.core.graphbound import GraphBound
from ocibridge.errors import NotFound, OcibridgeError, UsageError
from ocibridge.oci.bookkeeping import referrer_of_tag
from ocibridge.oci.digest import is_digest
from ocibridge.oci.models import Descriptor
from ocibridge.places.locate import Locator, text_of
from ocibridge.places.targets import closes_its_stores
from ocibridge.stores.base import Store
from ocibridge.stores.local_names import ATTACHED_TAG
from ocibridge.transfer.results import RemoveResult


@runtime_checkable
class DeletesManifests(Protocol):
    """Stores that can remove a manifest (a layout's index entry, a registry's DELETE)."""

    def delete_manifest(self, desc: Descriptor) -> None: ...


@closes_its_stores
def delete(ref: str | Locator, *, transfer: TransferOptions | None = None, force: bool = False,
           dry_run: bool = False) -> RemoveResult:
    """Delete a manifest from a registry or a layout (oras ``manifest delete``): a tag is
    resolved to its digest first, and every tag naming that manifest goes with it, as does
    every artifact referring to it (signature bundles, OMS signatures, chunk tables,
    attestations, and theirs in turn: found through the referrers API or the fallback index
    ``sha256-<hex>``) and the tags of its signatures and attachments (cosign's
    ``sha256-<hex>.sig/.att/.sbom``, the fallback index's tag). When that is more than the tag
    named, it is refused unless ``force``; ``dry_run`` lists what would go and deletes nothing.
    Referrers go first, then the tags of attachments, then the manifest: a failure half-way
    leaves the model, never a signature without its model."""
    rewrite_before(ref)  # the release before's names first: the name typed is found in its new form
    located = store_reference(ref)  # once, here
    ref = text_of(located)
    target = open_store(located, transfer)
    store = target.store
    if not isinstance(store, DeletesManifests):
        raise UsageError(f"{ref}: this store cannot delete manifests")
    desc = store.resolve(target.reference)
    named = () if is_digest(target.reference) else (target.reference,)
    referrers = _referrers_below(store, desc)
    same, companions = _tags_going_with(store, desc, named, tuple(r.digest for r in referrers))
    tags = (*named, *same, *companions)
    tagged = _resolved(store, companions)
    listed = tuple(dict.fromkeys([*(r.digest for r in referrers), *(d.digest for d in tagged)]))
    if dry_run:
        return RemoveResult(ref, desc.digest, tags, listed, dry_run=True)
    if (len(tags) > len(named) or referrers) and not force:
        others = ", ".join([*(t for t in tags if t not in named),
                            *([f"{len(referrers)} referrer(s)"] if referrers else [])])
        raise OcibridgeError(f"{ref}: deleting {desc.digest} also removes {others}; "
                             "--force to delete them all, --dry-run to list")
    removed: list[str] = []
    for referrer in referrers:  # deepest first
        if _delete_if_there(store, referrer):
            removed.append(referrer.digest)
    for companion in tagged:  # a cosign .sig, the fallback index (gone already if a registry cleans up)
        if companion.digest not in removed and _delete_if_there(store, companion):
            removed.append(companion.digest)
    store.delete_manifest(desc)
    return RemoveResult(ref, desc.digest, tags, tuple(removed))


def _resolved(store: Store, tags: Sequence[str]) -> list[Descriptor]:
    found = []
    for tag in tags:
        try:
            found.append(store.resolve(tag))
        except NotFound:
            continue  # deleted meanwhile
    return found


def _delete_if_there(store: DeletesManifests, desc: Descriptor) -> bool:
    try:
        store.delete_manifest(desc)
    except NotFound:
        return False
    return True


def _referrers_below(store: Store, subject: Descriptor) -> list[Descriptor]:
    """Every artifact referring to ``subject``, and to those in turn, deepest first, once each."""
    bound = GraphBound(f"referrers of {subject.digest}")
    order: list[tuple[int, Descriptor]] = []
    seen = {subject.digest}
    pending = [(subject, 0)]
    while pending:
        node, depth = pending.pop()
        for referrer in store.referrers(node):
            if referrer.digest in seen or not bound.enter(referrer.digest, depth + 1):
                continue
            seen.add(referrer.digest)
            order.append((depth + 1, referrer))
            pending.append((referrer, depth + 1))
    return [d for _, d in sorted(order, key=lambda pair: -pair[0])]


def _tags_going_with(store: Store, desc: Descriptor, named: tuple[str, ...],
                     referrers: tuple[str, ...] = ()) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(other tags naming ``desc``, tags of its signatures and attachments and of its
    ``referrers``' own), each sorted."""
    same: list[str] = []
    companions: list[str] = []
    attached = {d.partition(":")[2] for d in (desc.digest, *referrers)}
    for tag in store.tags():
        if tag in named:
            continue
        match = ATTACHED_TAG.match(tag)
        if match:
            if match.group(1) in attached:
                companions.append(tag)
            continue
        if referrer_of_tag(tag) is not None:
            continue  # a referrer's own tag (oci/bookkeeping.py): it goes with the referrer, listed already
        try:
            if store.resolve(tag).digest == desc.digest:
                same.append(tag)
        except NotFound:
            continue  # deleted meanwhile
    return tuple(sorted(same)), tuple(sorted(companions))
