"""Putting signatures into a store and finding them again, for any :class:`Store`.

Classic signatures live under a tag (``sha256-<hex>.sig``); adding one reads the manifest that
tag names and writes a new one with the extra layer, so earlier signatures stay. Bundles are
pushed as referrers: the registry store lists them through the referrers API or keeps the
``sha256-<hex>`` fallback index itself, the layout store finds them in its index.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from ocibridge.errors import NotFound
from ocibridge.oci.models import Descriptor, Manifest, parse_manifest_bytes
from ocibridge.signing.classic import (
    COMPANION_SUFFIXES,
    SignatureLayer,
    merged_layers,
    signature_manifest,
    signature_tag,
)
from ocibridge.signing.payload import SIMPLE_SIGNING_MEDIA_TYPE
from ocibridge.signing.sigstorebundle import SIGN_PREDICATE_TYPE, is_bundle_type, referrer_manifest
from ocibridge.stores.base import Store, WritableStore, referrers_read
from ocibridge.transfer.copy import CopyStats
from ocibridge.transfer.writer import Blob, retag, write_artifact

Read = Callable[[Store, Descriptor], bytes]
"""Reads a manifest of a store by its descriptor (a caller's cache of what it read)."""


def _tagged(store: Store, tag: str) -> Descriptor | None:
    try:
        return store.resolve(tag)
    except NotFound:
        return None


def _layers_at(store: Store, desc: Descriptor | None, read: Read | None = None) -> list[Descriptor]:
    if desc is None:
        return []
    node = parse_manifest_bytes(read(store, desc) if read is not None else store.fetch_bytes(desc), desc.mediaType)
    return list(node.layers) if isinstance(node, Manifest) else []


def attach_classic(store: WritableStore, subject: Descriptor, layer: SignatureLayer) -> tuple[Descriptor, bool]:
    """Add one signature to ``subject``'s ``.sig`` manifest: (manifest, whether it changed)."""
    assert layer.payload is not None
    tag = signature_tag(subject.digest)
    current = _tagged(store, tag)
    existing = _layers_at(store, current)
    layers = merged_layers(existing, [layer.descriptor])
    if current is not None and len(layers) == len(existing):
        return current, False
    config_desc, config, desc, data = signature_manifest(layers)
    write_artifact(store, desc, data, [Blob.of_bytes(layer.descriptor, layer.payload),
                                       Blob.of_bytes(config_desc, config)], [tag])
    return desc, True


def attach_bundle(store: WritableStore, subject: Descriptor, bundle: bytes,
                  predicate_type: str = SIGN_PREDICATE_TYPE) -> tuple[Descriptor, bool]:
    """Push ``bundle`` as a referrer of ``subject``: (referrer manifest, whether it was new)."""
    layer, data, desc = referrer_manifest(subject, bundle, predicate_type)
    sent = write_artifact(store, desc, data, [Blob.empty(), Blob.of_bytes(layer, bundle)])
    return desc, sent.manifests_copied > 0


@dataclass
class Attached:
    """Signature material of one digest as found in a store."""

    classic: list[SignatureLayer]
    bundles: list[tuple[Descriptor, bytes]]  # (referrer manifest, bundle bytes)


def find_signatures(store: Store, subject: Descriptor) -> Attached:
    """Every classic signature layer (payloads read) and every bundle referrer of ``subject``."""
    classic = []
    for layer in _layers_at(store, _tagged(store, signature_tag(subject.digest))):
        if layer.mediaType == SIMPLE_SIGNING_MEDIA_TYPE:
            classic.append(SignatureLayer(layer, store.fetch_bytes(layer)))
    bundles = []
    held = referrers_read(store, subject)
    for ref in held:
        node = parse_manifest_bytes(held.manifest(ref), ref.mediaType)
        if not isinstance(node, Manifest):
            continue
        kind = node.artifactType or ref.artifactType
        for layer in node.layers:
            if is_bundle_type(layer.mediaType) or (is_bundle_type(kind) and len(node.layers) == 1):
                bundles.append((ref, store.fetch_bytes(layer)))
    return Attached(classic, bundles)


def is_signature_referrer(desc: Descriptor) -> bool:
    return is_bundle_type(desc.artifactType)


def companion_tags(store: Store, subject: Descriptor,
                   listed: Collection[str] | None = None) -> list[tuple[Descriptor, str]]:
    """cosign's tags beside ``subject`` (``.sig``, ``.att``, ``.sbom``) that ``store`` holds;
    ``listed``: the store's tags as the caller listed them: one not there is not asked about."""
    found = []
    for suffix in COMPANION_SUFFIXES:
        tag = signature_tag(subject.digest, suffix)
        if listed is not None and tag not in listed:
            continue
        desc = _tagged(store, tag)
        if desc is not None:
            found.append((desc, tag))
    return found


def companions_lacking(src: Store, dst: Store, subject: Descriptor, read: Read | None = None,
                       listed: Collection[str] | None = None) -> int:
    """How many of cosign's tags beside ``subject`` in ``src`` hold a signature ``dst`` lacks:
    the tag is not there, or names a manifest without one of the source's layers (the rule
    :func:`carry_companion_tags` merges by, so a target that holds more, its own signatures
    merged in, lacks nothing). One HEAD at ``dst`` per tag the source holds; the two manifests
    are read only where their digests differ (``read``: how the source's is read; ``listed``:
    the source's tags, as :func:`companion_tags` takes them)."""
    lacking = 0
    for desc, tag in companion_tags(src, subject, listed):
        there = _tagged(dst, tag)
        if there is not None and there.digest == desc.digest:
            continue
        held = _layers_at(dst, there)
        if there is None or len(merged_layers(held, _layers_at(src, desc, read))) > len(held):
            lacking += 1
    return lacking


def carry_companion_tags(src: Store, dst: WritableStore, subject: Descriptor,
                         copy_manifest: Callable[[Descriptor], None], stats: CopyStats | None = None) -> list[str]:
    """Copy ``subject``'s cosign tags from ``src`` to ``dst``; digests of what was carried.

    ``copy_manifest`` copies one manifest with its blobs (the caller's graph copy). When ``dst``
    already holds the tag with other signatures, the two are merged: none is lost; what the
    merge sends is counted in ``stats`` (the caller's copy).
    """
    carried = []
    for desc, tag in companion_tags(src, subject):
        there = _tagged(dst, tag)
        if there is not None and there.digest == desc.digest:
            carried.append(desc.digest)
            continue
        if there is None:
            copy_manifest(desc)
            retag(dst, desc, [tag])
            carried.append(desc.digest)
            continue
        held = _layers_at(dst, there)
        layers = merged_layers(held, _layers_at(src, desc))
        if len(layers) == len(held):  # every signature of the source's is there: nothing to write
            carried.append(there.digest)
            continue
        copy_manifest(desc)  # its layers (the signatures' payloads), which the merged manifest names
        config_desc, config, merged, data = signature_manifest(layers)
        sent = write_artifact(dst, merged, data, [Blob.of_bytes(config_desc, config)], [tag])
        if stats is not None:
            stats.absorb(sent)
        carried.append(merged.digest)
    return carried


class SignatureCompanions:
    """The copy's :class:`~ocibridge.transfer.copy.Companions` for signatures: bundle referrers
    count as signatures, and cosign's tag-named companions travel with their subject."""

    def is_signature(self, desc: Descriptor) -> bool:
        return is_signature_referrer(desc)

    def carry(self, src: Store, dst: WritableStore, subject: Descriptor,
              copy_manifest: Callable[[Descriptor], None], stats: CopyStats) -> list[str]:
        return carry_companion_tags(src, dst, subject, copy_manifest, stats)
