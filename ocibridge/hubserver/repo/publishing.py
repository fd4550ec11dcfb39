"""A commit written into its repository: the artifact made from what serve proved of each file
(:func:`ocibridge.model.known.plan_known`: ``push``'s artifact of the same files, with nothing
hashed again) and copied there (:func:`ocibridge.model.deliver.deliver`, push's own copy, its
chunk table attached). The manifest goes by digest only; with evidence it is signed and attested;
then it gets its commit tag, and only then does the branch's tag move (:mod:`.landing`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ocibridge.hubserver.repo import grouped
from ocibridge.hubserver.repo.commits import BadCommit
from ocibridge.hubserver.repo.evidence import EvidenceFailed
from ocibridge.hubserver.repo.landing import land
from ocibridge.kinds.hf.datasetpackage import mark_dataset
from ocibridge.kinds.hf.repotype import DATASET, REPO_TYPE_KEY, dataset_file_kind
from ocibridge.oci.mediatypes import Kind
from ocibridge.oci.reference import LayoutReference, RegistryReference
from ocibridge.stores.base import Store, WritableStore

if TYPE_CHECKING:
    from ocibridge.hubserver.repo.evidence import Evidence
    from ocibridge.hubserver.repo.sources import Repository
    from ocibridge.model.known import KnownFile


@dataclass(frozen=True)
class Publishing:
    """How this serve writes commits (none in its settings: it refuses them): blobs sent at
    once by the copy (``--concurrency``); the signature and attestations every commit carries."""

    concurrency: int = 4
    evidence: Evidence | None = None


def publish(publishing: Publishing, files: Mapping[str, KnownFile], name: str, repo: Repository, tag: str,
            annotations: Mapping[str, str], mounts: Mapping[str, Store],
            before_branch: Callable[[], None] | None = None, *, dataset: bool = False) -> str:
    """Write the commit of ``files`` (path -> what serve knows of it) as the model ``name`` into
    ``repo`` under ``tag``, the commit's ``annotations`` on its manifest; its manifest digest.
    ``mounts``: digest -> a repository to mount that blob from; ``before_branch``: called right
    before the branch's tag moves, which it stops by raising (the writer lease's check).
    ``dataset``: the files are a dataset's (:mod:`ocibridge.kinds.hf.repotype`): data layers (its
    card a doc), grouped as push groups them (unless a group would hold a large file:
    :data:`.grouped.GROUPED_MAX`), and the manifest says the repository's type. Where files are
    grouped into a tar layer, the manifest records where each lies (:mod:`.grouped`), so reads
    find one without the layer."""
    from ocibridge.chunks.chunking import ChunkPolicy
    from ocibridge.model.builder import BuildOptions, plan_layers
    from ocibridge.model.deliver import deliver
    from ocibridge.model.known import cheapest_hash, plan_known

    evidence = publishing.evidence
    if evidence is not None and not isinstance(repo.base, RegistryReference):
        raise EvidenceFailed(f"{repo.shown}: serve signs commits pushed to a registry; an OCI layout source "
                             "cannot hold an untagged manifest until it is signed")
    # push's artifact, but every file kept: .gitattributes is a file of a Hub repository; and no
    # file at all is a commit (the Hub's empty repository: the empty descriptor its one layer);
    # its chunk table in the hash the files' tables mostly have (BLAKE3, unless the head's is SHA-256)
    said = {**annotations, REPO_TYPE_KEY: DATASET} if dataset else dict(annotations)
    options = BuildOptions(annotations=said, allow_empty=True)
    kinds = {"kind_of": _dataset_kind} if dataset else {}
    artifact = plan_known(files, name, options, ChunkPolicy(algorithm=cheapest_hash(files)), excludes=(), **kinds)
    if dataset:  # the card's dataset fields, as push hf:datasets/... maps them (kinds/hf/datasetpackage.py)
        mark_dataset(artifact.package)
    # before the artifact is built (on its first read, by the copy): where grouped files lie, or
    # no group at all where push's would hold a large file (grouped.py, GROUPED_MAX)
    layers = plan_layers(artifact.package, options)
    if grouped.too_large(layers):
        artifact.options = replace(options, auto_group=False)
    elif (placed := grouped.record(layers)) is not None:
        artifact.options = replace(options, annotations={**said, grouped.GROUPED: placed})
    with _writable(repo) as store:
        reference = repo.reference(tag)
        # by digest into a registry, then its commit tag, then the branch's (landing.py); a layout,
        # which cannot hold an untagged manifest (and collects no garbage), tagged by the copy first
        first = None if evidence is not None or isinstance(repo.base, RegistryReference) else reference
        if first is not None and before_branch is not None:
            before_branch()  # the push itself moves the branch
        delivered = deliver(artifact, store, first, concurrency=publishing.concurrency, mounts=mounts)
        digest = delivered.descriptor.digest
        land(store, digest, reference, annotations, evidence, before_branch)
    return digest


def _dataset_kind(path: str, size: int) -> Kind:
    """A dataset file's kind; the Hub's ``.gitattributes`` (which push leaves out) is the code file
    it is in a model, so the data files group into the very layer push makes of them."""
    if path == ".gitattributes":
        from ocibridge.model.classify import classify

        return classify(path, size)
    return dataset_file_kind(path)


@contextlib.contextmanager
def _writable(repo: Repository) -> Iterator[WritableStore]:
    """``repo``'s store, to write: a registry repository as serve reads it, a layout opened to
    write (its blobs kept fresh for a concurrent garbage collection, as push opens it)."""
    if isinstance(repo.base, LayoutReference):
        from ocibridge.stores.layout import LayoutStore

        layout = LayoutStore(repo.base.path, create=True)
        try:
            yield layout
        finally:
            layout.close()  # ends this writer's lease
        return
    if not isinstance(repo.store, WritableStore):
        raise BadCommit(f"{repo.shown}: not a place serve can push to")
    yield repo.store
