"""Which way a push's new file goes to a registry, so that both promises hold: no byte
the registry holds is sent, and a file of new content is read once.

* A file the content-sample index (transfer/sampleindex.py) names a candidate digest for is *known
  content*: the registry is asked about the candidate (HEAD, or a mount from a repository seen
  holding it); if held, the file is hashed locally to confirm, and nothing is sent.
* Anything else is *new content*: uploaded while it is hashed (the registry's streaming ingest),
  one read. Its digest is known only when its last byte has been sent, so there is nothing to
  cancel early; should the registry hold it by then (another pusher), the final ``PUT ?digest=``
  simply completes (idempotent, one request) rather than a HEAD and a DELETE (two).
* A candidate that fails confirmation (the middle of the file differs), or one the registry
  lacks, is sent like new content: after a failed confirmation the real digest, now known, is
  asked about first, so only the mismatched read is spent twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from ocibridge.core import interrupt
from ocibridge.errors import DigestMismatch
from ocibridge.oci.digest import CHUNK
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import PendingBlob
from ocibridge.transfer import sampleindex
from ocibridge.transfer.progress_events import PATH_KEY
from ocibridge.transfer.repohints import RepositoryHints

BLOB_TYPE = "application/octet-stream"


def indexed(blob: PendingBlob) -> bool:
    """Whether ``blob`` takes the sample index's way: a file on disk larger than its sample
    (smaller files and streams of no file are hashed first and asked about, as before)."""
    return blob.source_path is not None and sampleindex.applies(blob.key.size)


def hash_whole(blob: PendingBlob) -> tuple[str, int]:
    """Read ``blob`` once for its digest and size (its opener may tabulate chunks as it goes).
    A stream that checks a digest itself (``PendingBlob.vouched``: a carton file against its
    MANIFEST) is read, not hashed again: it raises at its end if its content is not that."""
    if blob.vouched is not None:
        size = 0
        with blob.open() as reader:
            while data := reader.read(CHUNK):
                interrupt.check()
                size += len(data)
        if size != blob.vouched.size:
            raise DigestMismatch(f"{blob.vouched.digest}: got {size} bytes, expected {blob.vouched.size}")
        return blob.vouched.digest, size
    hasher, size = hashlib.sha256(), 0
    with blob.open() as reader:
        while data := reader.read(CHUNK):
            interrupt.check()
            hasher.update(data)
            size += len(data)
    return "sha256:" + hasher.hexdigest(), size


def by_sample(blobs: list[PendingBlob]) -> list[list[PendingBlob]]:
    """:func:`indexed` blobs in groups of one size and sample, to be placed one after another:
    the first of equal files is sent, the next finds it indexed and held, and is only confirmed
    (without the index, each is a group of its own)."""
    groups: dict[object, list[PendingBlob]] = {}
    for blob in blobs:
        assert blob.source_path is not None
        sampled = sampleindex.sample_of(blob.source_path) if sampleindex.enabled() else None
        groups.setdefault(sampled if sampled is not None else id(blob), []).append(blob)
    return list(groups.values())


def place(blob: PendingBlob, held: Callable[[Descriptor], bool],
          send: Callable[[PendingBlob], None], hints: RepositoryHints | None = None) -> None:
    """Settle an :func:`indexed` blob: confirmed as content ``held`` says the destination has
    (nothing sent), else ``send`` uploads it while hashing it. The candidate comes from the
    sample index, else from the destination repository's own manifests (``hints``)."""
    assert blob.source_path is not None
    index_on = sampleindex.enabled()
    sampled = sampleindex.sample_of(blob.source_path) if index_on or hints is not None else None
    candidate = sampleindex.lookup(*sampled) if sampled is not None and index_on else None
    path = (blob.key.annotations or {}).get(PATH_KEY)
    if candidate is None and hints is not None and sampled is not None and path is not None:
        candidate = hints.candidate(path, sampled[0], sampled[1])
    if candidate is not None and sampled is not None \
            and held(Descriptor(mediaType=BLOB_TYPE, digest=candidate, size=sampled[0])):
        digest, size = hash_whole(blob)
        if digest == candidate or held(Descriptor(mediaType=BLOB_TYPE, digest=digest, size=size)):
            blob.settle(digest, size)
            return
    send(blob)
