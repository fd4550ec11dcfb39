"""Everyday store commands as API calls: list, rm, tag, resolve, attach, discover (delete is
delete_ops.py's, prune prune_ops.py's).

They follow the tools users know: modctl/ollama ``ls``/``rm``/``prune`` for the local store,
oras ``tag``/``manifest delete``/``resolve``/``attach``/``discover`` for any store. A bare NAME
(no ``oci:``, no registry host) means a tag of the default store.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ocibridge.api.model_ops import TransferOptions
from ocibridge.api.opening import open_at
from ocibridge.api.opening import store_reference as store_reference  # public here too (delete_ops)
from ocibridge.core import boundedjson
from ocibridge.core.fsutil import is_utf8_name, safe_relpath
from ocibridge.core.graphbound import GraphBound
from ocibridge.core.textlists import one_or_many
from ocibridge.errors import OcibridgeError, UsageError
from ocibridge.oci.bookkeeping import is_bookkeeping, refuse_as_destination
from ocibridge.oci.cnaidraft import ANNOTATION_PREFIX, is_draft
from ocibridge.oci.digest import is_digest, sha256_file
from ocibridge.oci.empty import empty_descriptor
from ocibridge.oci.mediatypes import ANNOTATION_CREATED, ANNOTATION_REF_NAME, ANNOTATION_TITLE, OCI_MANIFEST
from ocibridge.oci.mediatypes import family_of_artifact as _family_of
from ocibridge.oci.models import Descriptor, Index, Manifest, parse_manifest_bytes
from ocibridge.oci.reference import (
    LayoutReference,
    RegistryReference,
)
from ocibridge.places.locate import Locator, Role, text_of
from ocibridge.places.locators import KindPlace
from ocibridge.places.targets import (
    StoreTarget,
    closes_its_stores,
    default_store_path,
    is_local_name,
    open_store_target,
    rewrite_if_local,
)
from ocibridge.stores.base import Store
from ocibridge.stores.layout import LAYOUT_FILE, LayoutStore
from ocibridge.stores.local_names import (
    ATTACHED_TAG,
    is_legacy,
    is_tag,
    listed_name,
    split_local_name,
    stored_name,
)
from ocibridge.transfer.results import (
    AttachResult,
    DiscoverResult,
    ModelEntry,
    ReferrerNode,
    RemoveResult,
    ResolveResult,
    TagResult,
)
from ocibridge.transfer.writer import Blob, retag, write_artifact

#: where ``ls`` finds the name and date of an early CNAI draft artifact (it has no config)
DRAFT_NAME, DRAFT_CREATED = ANNOTATION_PREFIX + "name", ANNOTATION_PREFIX + "created"


def nearest_local_names(text: str) -> list[str]:
    """For a bare ``NAME[:TAG]`` that the local store does not hold (and so was looked for on
    docker.io, as Docker does): the local store's names nearest to it; empty for any other
    text, or when the store holds nothing."""
    from ocibridge.places.targets import default_store_path, local_store_reference
    from ocibridge.stores.local_names import nearest_names, split_local_name

    if split_local_name(text) is None or not (default_store_path() / LAYOUT_FILE).is_file():
        return []
    if local_store_reference(text) is not None:
        return []  # it is there: whatever failed, it was not the name
    return nearest_names(LayoutStore(default_store_path()), text)


def open_store(ref: str | Locator, transfer: TransferOptions | None) -> StoreTarget:
    """The store ``ref`` names (located as :func:`store_reference` locates it), opened as every call opens one."""
    return open_at(store_reference(ref), transfer)


def layout_store(ref: str | None) -> LayoutStore | None:
    """The layout ``ref`` names; None for a default store nothing was pushed to yet (listing
    or pruning it must not create it)."""
    parsed = store_reference(ref, Role.LAYOUT)
    if ref is None and not (default_store_path() / LAYOUT_FILE).exists():
        return None
    target = open_store_target(parsed)
    if not isinstance(target.store, LayoutStore):
        raise UsageError(f"{ref}: not an OCI image layout (oci:PATH)")
    return target.store


# -- list ---------------------------------------------------------------------------------------
def list_models(layout: str | None = None, *, include_attached: bool = False) -> list[ModelEntry]:
    """The models a layout lists (default: the local store), one entry per tag.

    Signatures and other attached artifacts (a ``subject``, or cosign's ``sha256-<hex>.sig``,
    ``.att``, ``.sbom`` and referrers-fallback tags) are counted on the model they refer to, as
    ``ollama list``/``modctl ls`` show models only; ``include_attached`` lists them as well,
    and the names ``ocibridge serve`` keeps for itself (``NAME:ocibridge-commit-<id>``, serve.md).
    """
    store = layout_store(layout)
    if store is None:
        return []
    index = store.read_index()
    local = layout is None
    entries = []
    for entry in index.manifests:
        tag = (entry.annotations or {}).get(ANNOTATION_REF_NAME)
        described = _describe_entry(store, entry, tag)
        if local and tag is not None and described.subject is None:  # attached: listed by its tag
            described = _as_typed(store, index, described, tag)
        elif tag is not None and described.subject is None:
            described = _split_reference_name(described, tag)
        entries.append(described)
    attached = Counter(e.subject for e in entries if e.subject)
    entries = [dataclasses.replace(e, attached=attached[e.digest]) if attached[e.digest] else e for e in entries]
    if not include_attached:  # and serve's bookkeeping names (oci/bookkeeping.py): a commit's is its branch's model
        entries = [e for e in entries if e.subject is None and not is_bookkeeping(e.ref or "")]
    return sorted(entries, key=lambda e: (e.name or "", e.tag or "", e.digest))


def _as_typed(store: LayoutStore, index: Index, entry: ModelEntry, ref: str) -> ModelEntry:
    """An entry of the local store with the NAME and TAG to type (``listed_name``)."""
    name, tag = listed_name(store, ref, entry.model if is_legacy(ref) else None, index=index)
    return dataclasses.replace(entry, name=name, tag=tag)


def _split_reference_name(entry: ModelEntry, ref: str) -> ModelEntry:
    """An entry another tool named ``REPOSITORY:TAG`` (kit's ``tiny-llama:latest``, Docker Model
    Runner's ``docker.io/ai/dummy:fixture``) shown as that NAME and TAG, as the local store's are;
    ``ref`` keeps the whole name, which ``oci:DIR:REF`` takes."""
    name, colon, tag = ref.rpartition(":")
    if not colon or not name or not is_tag(tag):
        return entry
    return dataclasses.replace(entry, name=name, tag=tag)


def _subject_of(node: Manifest | Index, tag: str | None) -> str | None:
    """The digest an attached artifact refers to, by its ``subject`` or by cosign's tag scheme."""
    if node.subject is not None:
        return node.subject.digest
    match = ATTACHED_TAG.match(tag or "")
    return f"sha256:{match.group(1)}" if match else None


def _describe_entry(store: Store, entry: Descriptor, tag: str | None) -> ModelEntry:
    size, name, created, family = entry.size, None, None, None
    try:
        data = store.fetch_bytes(entry)
        node = parse_manifest_bytes(data, entry.mediaType)
    except OcibridgeError:
        return ModelEntry(None, tag, entry.digest, size, None, None, ref=tag)
    subject = _subject_of(node, tag)
    if isinstance(node, Manifest):
        size += node.config.size + sum(layer.size for layer in node.layers)
        fam = _family_of(node.artifactType, node.config.mediaType)
        family, name = (fam.value, None) if fam else _other_family(store, entry, data, node)
        created = (node.annotations or {}).get(ANNOTATION_CREATED)
        if is_draft(node):  # the early CNAI draft: no config, its metadata in annotations
            said = node.annotations or {}
            family, name = "cnai-draft", said.get(DRAFT_NAME)
            created = said.get(DRAFT_CREATED, created)
        elif fam is not None:
            name, created = _config_name_created(store, node.config, created)
    else:
        size += sum(m.size for m in node.manifests)
    return ModelEntry(name, tag, entry.digest, size, created, family, subject=subject, ref=tag, model=name)


def _other_family(store: Store, entry: Descriptor, data: bytes, node: Manifest) -> tuple[str | None, str | None]:
    """A model of another family (a ModelKit, a Docker model) by its media types, named as
    ``inspect`` names it, and the name its family reads in it (a Kitfile's package name);
    (None, None) for anything else."""
    from ocibridge.kinds.families import family_of

    found = family_of(node)
    if found is None:
        return None, None
    try:
        return found.name, found.read(store, entry, data, node).view.name
    except OcibridgeError:  # listed all the same: its name is what could not be read
        return found.name, None


def _config_name_created(store: Store, config: Descriptor, created: str | None) -> tuple[str | None, str | None]:
    try:
        data = boundedjson.loads(store.fetch_bytes(config))
    except (OcibridgeError, ValueError):
        return None, created
    descriptor = data.get("descriptor") if isinstance(data, dict) else None
    if not isinstance(descriptor, dict):
        return None, created
    return descriptor.get("name"), descriptor.get("createdAt") or created


# -- rm / delete / prune ------------------------------------------------------------------------
@closes_its_stores
def remove(ref: str | Locator) -> RemoveResult:
    """Take a model out of a layout (default store for a bare NAME): by tag, that tag; by digest,
    every entry of that manifest. Blobs stay until :func:`prune`."""
    rewrite_before(ref)  # the release before's names first: the name typed is found in its new form
    located = store_reference(ref, Role.LOCAL)  # once, here
    ref = text_of(located)
    target = open_store_target(located)
    store = target.store
    if not isinstance(store, LayoutStore):
        raise UsageError(f"rm works on a layout or the local store; for a registry use 'delete {ref}'")
    if is_digest(target.reference):
        desc = store.resolve(target.reference)
        tags = tuple(t for t in store.tags() if store.resolve(t).digest == desc.digest)
        store.delete_manifest(desc)
    else:
        desc = store.untag(target.reference)
        tags = (target.reference,)
    return RemoveResult(ref, desc.digest, tags, _remove_orphaned_referrers(store, desc))


def _remove_orphaned_referrers(store: LayoutStore, subject: Descriptor) -> tuple[str, ...]:
    """Once a manifest is no longer listed, the artifacts attached to it (cards, signatures,
    theirs in turn) would stay listed untagged for nothing: they go with it."""
    if any(e.digest == subject.digest for e in store.read_index().manifests):
        return ()
    removed: list[str] = []
    bound = GraphBound(f"referrers of {subject.digest}")
    pending = [(subject, 0)]
    while pending:
        node, depth = pending.pop()
        for referrer in store.referrers(node):
            if not bound.enter(referrer.digest, depth + 1):
                continue
            if any(e.digest == referrer.digest and (e.annotations or {}).get(ANNOTATION_REF_NAME)
                   for e in store.read_index().manifests):
                continue  # tagged on its own: the user keeps it
            store.delete_manifest(referrer)
            removed.append(referrer.digest)
            pending.append((referrer, depth + 1))
    return tuple(removed)


# -- tag / resolve ------------------------------------------------------------------------------
@closes_its_stores
def tag(ref: str | Locator, tags: str | Sequence[str], *, transfer: TransferOptions | None = None) -> TagResult:
    """Point more tags at what ``ref`` names, in the same repository (oras ``tag``); one tag
    may be given alone."""
    tags = one_or_many(tags)
    if not tags:
        raise UsageError("tag needs at least one new TAG")
    for new_tag in tags:
        refuse_as_destination(new_tag, new_tag)
    rewrite_before(ref)  # the release before's names first: the name typed is found in its new form
    located = store_reference(ref)  # once, here
    ref = text_of(located)
    target = open_store(located, transfer)
    desc = target.store.resolve(target.reference)
    named = split_local_name(ref) if is_local_name(located) else None
    new = tuple(_local_tag(named, t) for t in tags) if named is not None else tuple(tags)
    retag(target.store, desc, new)
    _rewrite_after(target)
    return TagResult(desc.digest, new)


def _local_tag(source: tuple[str, str], new: str) -> str:
    """A new name of a local model: ``TAG`` is a new tag of its NAME, ``NAME:TAG`` that name."""
    named = split_local_name(new) if ":" in new else (source[0], new) if is_tag(new) else None
    if named is None:
        raise UsageError(f"{new!r}: a new name in the local store is TAG or NAME:TAG")
    return stored_name(*named)


def rewrite_before(ref: str | Locator) -> None:
    """A command about to write names a local model: the store's names from the release before
    become ``NAME:TAG`` first, so the name typed is found by its new form."""
    if isinstance(ref, str) and split_local_name(ref) is not None and (default_store_path() / LAYOUT_FILE).is_file():
        rewrite_if_local(LayoutStore(default_store_path()))


def _rewrite_after(target: StoreTarget) -> None:
    """A write into the local store spelt ``oci:STORE:…`` may have written an old-style name."""
    if isinstance(target.store, LayoutStore):
        rewrite_if_local(target.store)


@closes_its_stores
def resolve(ref: str | Locator, *, transfer: TransferOptions | None = None) -> ResolveResult:
    """The descriptor (digest, media type, size) a tag names (oras ``resolve``)."""
    located = store_reference(ref)  # once, here
    ref = text_of(located)
    target = open_store(located, transfer)
    return ResolveResult(ref, target.store.resolve(target.reference))


# -- attach / discover --------------------------------------------------------------------------
@closes_its_stores
def attach(
    subject_ref: str | Locator,
    files: str | Sequence[str],
    *,
    artifact_type: str,
    annotations: dict[str, str] | None = None,
    transfer: TransferOptions | None = None,
) -> AttachResult:
    """Push an artifact whose ``subject`` is ``subject_ref`` (oras ``attach``): an empty config,
    one layer per file (titled by its name), listed by the subject's referrers."""
    if not artifact_type:
        raise UsageError("attach needs --artifact-type TYPE")
    from ocibridge.model.validate import MEDIA_TYPE

    if MEDIA_TYPE.fullmatch(artifact_type) is None:  # what image-spec's schema and registries refuse
        raise UsageError(f"--artifact-type {artifact_type!r} is not a media type (RFC 6838: type/subtype, "
                         "such as application/vnd.example.card)")
    if isinstance(subject_ref, str):
        rewrite_before(subject_ref)
    parsed = store_reference(subject_ref)  # once: opened, then named in the result
    target = open_store(parsed, transfer)
    store = target.store
    subject = store.resolve(target.reference)
    config = empty_descriptor()
    blobs = [Blob.empty()]
    for name in one_or_many(files):
        path = Path(name)
        if not path.is_file():
            raise UsageError(f"{name}: no such file")
        if not is_utf8_name(path.name):  # its title, an annotation, is text
            raise UsageError(f"{name}: its name is not UTF-8, and the layer is titled by it: rename it")
        blobs.append(_file_blob(path))
    # oras: an artifact with no files carries the empty blob as its one layer
    layers = [blob.desc for blob in blobs[1:]] or [config]
    all_annotations = dict(annotations or {})
    manifest = Manifest(mediaType=OCI_MANIFEST, artifactType=artifact_type, config=config,
                        layers=layers, subject=Descriptor(mediaType=subject.mediaType,
                                                          digest=subject.digest, size=subject.size),
                        annotations=all_annotations or None)
    body = manifest.to_json_bytes()
    desc = Descriptor.for_bytes(OCI_MANIFEST, body)
    write_artifact(store, desc, body, blobs)
    return AttachResult(f"{repository_text(parsed)}@{desc.digest}", desc, subject,
                        artifact_type)


def repository_text(ref: Locator) -> str:
    """``ref`` without its tag or digest: where a digest-pinned reference is appended."""
    if isinstance(ref, LayoutReference):
        return f"oci:{ref.path}"
    if isinstance(ref, RegistryReference):
        return f"{ref.registry}/{ref.repository}"
    if isinstance(ref, KindPlace):
        return ref.repository_text
    return ref.text


def _file_blob(path: Path) -> Blob:
    """An attached file as a layer titled by its name (hashed here: the layer names its digest)."""
    digest, size = sha256_file(path)
    title = safe_relpath(path.name, "file name")
    return Blob.of_file(Descriptor(mediaType="application/octet-stream", digest=digest, size=size,
                                   annotations={ANNOTATION_TITLE: title}), path)


#: how many levels below a subject's own referrers ``discover(tree=True)`` walks
TREE_DEPTH = 8


@closes_its_stores
def discover(ref: str | Locator, *, artifact_type: str | None = None,
             transfer: TransferOptions | None = None, tree: bool = False) -> DiscoverResult:
    """The artifacts whose ``subject`` is ``ref`` (oras ``discover``): the registry's referrers
    API where it has one, the ``sha256-<hex>`` fallback tag where not; a layout's index.
    ``tree``: also those referring to each of them, and so on (``TREE_DEPTH`` levels), as the
    command draws them (one more request per artifact found)."""
    located = store_reference(ref)  # once, here
    ref = text_of(located)
    target = open_store(located, transfer)
    subject = target.store.resolve(target.reference)
    found = tuple(target.store.referrers(subject, artifact_type))
    nodes = tuple(ReferrerNode(desc, _referrer_nodes(target.store, desc, 0)) for desc in found) if tree else ()
    return DiscoverResult(ref, subject, found, nodes)


def _referrer_nodes(store: Store, desc: Descriptor, depth: int) -> tuple[ReferrerNode, ...]:
    """The referrers of ``desc`` and theirs, ``depth`` levels below the subject's own."""
    if depth >= TREE_DEPTH:
        return ()
    return tuple(ReferrerNode(ref, _referrer_nodes(store, ref, depth + 1)) for ref in store.referrers(desc))


#: what a sigstore bundle's predicate type makes it, as discover names it (the bundle's artifact
#: type is the same for all: a signature, an AI-BOM and a provenance read alike without it)
PREDICATE_KINDS = (("https://sigstore.dev/cosign/sign/", "signature"), ("https://model_signing/", "OMS signature"),
                   ("https://cyclonedx.org/", "AI-BOM"), ("https://slsa.dev/provenance/", "provenance"))


def referrer_label(desc: Descriptor) -> str:
    """A referrer as discover shows it: its artifact type, and for a sigstore bundle (or any
    referrer carrying ``dev.sigstore.bundle.predicateType``) what it is and its predicate type."""
    from ocibridge.signing.sigstorebundle import PREDICATE_ANNOTATION

    kind = desc.artifactType or desc.mediaType
    predicate = (desc.annotations or {}).get(PREDICATE_ANNOTATION)
    if not isinstance(predicate, str) or not predicate:
        return kind
    shown = predicate if len(predicate) <= 100 else predicate[:97] + "..."  # the registry's text: bounded
    named = next((name for prefix, name in PREDICATE_KINDS if predicate.startswith(prefix)), "attestation")
    return f"{kind} ({named}: {shown})"
