"""A proxied repository's reads record: when each commit the upstream gave was last read here,
and which of its names (registry tags) the proxy itself tagged on which commit.

It is an OCI manifest under the bookkeeping tag ``ocibridge-reads`` (oci/bookkeeping.py), artifact
type :data:`~ocibridge.oci.bookkeeping.READS_ARTIFACT_TYPE`, the empty config and one JSON layer:
``{"read": {"<upstream commit id>": <unix seconds>}, "named": {"<tag>": "<upstream commit id>"}}``.
Kept in the registry, so every serve over the prefix and a restarted one read the same times; each
write is a new manifest under the same tag (the old one is left untagged, for the registry's GC).

A record that does not parse is read as empty: every commit's clock then starts again from the
next sweep (kept longer, never dropped sooner), and the next write replaces it."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from ocibridge.core import boundedjson
from ocibridge.errors import InvalidReference, NotFound, OcibridgeError
from ocibridge.hubserver.repo.recordlayer import record_layer
from ocibridge.hubserver.repo.sources import Repository
from ocibridge.hubserver.repo.tombstone import is_tombstone
from ocibridge.oci.bookkeeping import COMMIT_ID, READS_ARTIFACT_TYPE, READS_TAG
from ocibridge.oci.empty import empty_descriptor
from ocibridge.oci.mediatypes import OCI_MANIFEST
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import WritableStore

log = logging.getLogger("ocibridge.hubserver")
#: bytes of the record's manifest and layer read at most
RECORD_MAX = 4 * 1024 * 1024


@dataclass
class ReadsRecord:
    """Last reads (upstream commit id -> unix seconds) and the proxy's names (tag -> commit id)."""

    read: dict[str, int] = field(default_factory=dict)
    named: dict[str, str] = field(default_factory=dict)

    def merged(self, read: dict[str, int], named: dict[str, str]) -> ReadsRecord:
        """This record with later reads and newer names laid over it."""
        times = dict(self.read)
        for commit, when in read.items():
            times[commit] = max(when, times.get(commit, 0))
        return ReadsRecord(times, {**self.named, **named})

    def as_json(self) -> bytes:
        return json.dumps({"read": dict(sorted(self.read.items())), "named": dict(sorted(self.named.items()))},
                          separators=(",", ":")).encode()


def parsed(data: bytes) -> ReadsRecord:
    """The record's layer; entries that are not a commit id and a time (or a tag and an id) left out."""
    doc = boundedjson.loads(data)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    read, named = doc.get("read"), doc.get("named")
    return ReadsRecord(
        {k: int(v) for k, v in (read.items() if isinstance(read, dict) else ())
         if COMMIT_ID.fullmatch(k) and isinstance(v, int) and not isinstance(v, bool)},
        {k: v for k, v in (named.items() if isinstance(named, dict) else ())
         if isinstance(k, str) and isinstance(v, str) and COMMIT_ID.fullmatch(v)})


def read_reads(repo: Repository) -> ReadsRecord:
    """``repo``'s record; empty when it has none (or a deleted one: the tombstone), or what it holds
    is no record. A registry that fails is raised (:class:`OcibridgeError`): a sweep then leaves the
    repository as it is, a flush tries again later."""
    store = repo.store
    try:
        desc = store.resolve(repo.reference(READS_TAG))
    except (NotFound, InvalidReference):
        return ReadsRecord()
    if is_tombstone(desc.digest):
        return ReadsRecord()
    try:  # the registry's failures raise; what it holds that is no record starts the record again
        return parsed(record_layer(store, desc, READS_ARTIFACT_TYPE, READS_ARTIFACT_TYPE, RECORD_MAX, "reads",
                                   ValueError))
    except (NotFound, ValueError, RecursionError) as e:
        log.warning("%s: its reads record (%s) is not one serve reads, so it starts again: %s", repo.shown,
                    READS_TAG, e)
        return ReadsRecord()


def write_reads(repo: Repository, record: ReadsRecord) -> Descriptor:
    """``record`` as ``repo``'s ``ocibridge-reads`` manifest (its blobs first, then the tag)."""
    from ocibridge.transfer.writer import Blob, write_artifact

    store = repo.store
    if not isinstance(store, WritableStore):
        raise OcibridgeError(f"{repo.shown}: not a store serve can write its reads record to")
    data = record.as_json()
    layer = Descriptor.for_bytes(READS_ARTIFACT_TYPE, data)
    body = Manifest(mediaType=OCI_MANIFEST, artifactType=READS_ARTIFACT_TYPE, config=empty_descriptor(),
                    layers=[layer]).to_json_bytes()
    desc = Descriptor.for_bytes(OCI_MANIFEST, body)
    write_artifact(store, desc, body, [Blob.empty(), Blob.of_bytes(layer, data)], tags=[repo.reference(READS_TAG)])
    return desc
