"""Writing a repository's refs record (:mod:`..reading.refsrecord` says what it is): rewritten
whole by ``create_branch`` and ``create_tag``, before the plain tag of the new ref is written,
so a crash between the two leaves a recorded name without its tag (listed by nobody) rather
than a branch listed as a tag."""

from __future__ import annotations

from ocibridge.hubserver.reading.refsrecord import RefsRecord
from ocibridge.hubserver.reading.sources import Repository
from ocibridge.hubserver.writes.commits import BadCommit
from ocibridge.oci.bookkeeping import REFS_ARTIFACT_TYPE, REFS_LAYER_TYPE, REFS_TAG
from ocibridge.oci.mediatypes import OCI_EMPTY, OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import WritableStore

#: the empty config (image-spec's ``application/vnd.oci.empty.v1+json``)
EMPTY_JSON = b"{}"
#: the name of the lock of a repository's refs record among the branches' locks (no branch has it)
RECORD_LOCK = "\0refs"


def record_store(repo: Repository) -> WritableStore:
    """The store to write ``repo``'s record (and tags) in; :class:`BadCommit` when serve cannot write there."""
    if not isinstance(repo.store, WritableStore):
        raise BadCommit(f"{repo.shown}: not a store serve can tag")
    return repo.store


def write_record(repo: Repository, store: WritableStore, record: RefsRecord) -> Descriptor:
    """``record`` as the repository's ``ocibridge-refs`` manifest; its descriptor."""
    from ocibridge.transfer.writer import Blob, write_artifact

    data = record.as_json()
    layer = Descriptor.for_bytes(REFS_LAYER_TYPE, data)
    empty = Descriptor.for_bytes(OCI_EMPTY, EMPTY_JSON)
    body = Manifest(mediaType=OCI_MANIFEST, artifactType=REFS_ARTIFACT_TYPE, config=empty,
                    layers=[layer]).to_json_bytes()
    desc = Descriptor.for_bytes(OCI_MANIFEST, body)
    write_artifact(store, desc, body, [Blob.of_bytes(empty, EMPTY_JSON), Blob.of_bytes(layer, data)],
                   tags=[repo.reference(REFS_TAG)])
    return desc
