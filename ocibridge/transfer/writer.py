"""Writing a small artifact made in memory or from a few files (an attached file, a signature,
a chunk table, a new tag) into a store, through the one copy.

The artifact is held as a tiny read-only store (:class:`ArtifactSource`: the given blobs and the
manifest) and copied as a push copies a planned artifact, so a signature gets what a model gets:
each blob asked for first and skipped when there, mounted where the registry can, sent with a
reopen function (an interrupted upload restarts or resumes), the manifest last, progress and
undo when asked, and the copy's counts. Only the blobs given are the writer's business: the
others a manifest names (a ``.sig`` manifest's earlier signatures) are the destination's
already, and a destination that lacks them refuses the manifest.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import BinaryIO

from ocibridge.errors import NotFound
from ocibridge.oci.digest import verified
from ocibridge.oci.empty import EMPTY_JSON, empty_descriptor
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import CopyTarget, OneManifest, ReadableStore, Reopen, WritableStore
from ocibridge.transfer.copy import CopyHooks, CopyStats, copy
from ocibridge.transfer.progress import ProgressFn, counting


@dataclass(frozen=True)
class Blob:
    """One blob to write: its descriptor and how to read it from the start (as often as a
    resumed upload needs)."""

    desc: Descriptor
    open: Reopen

    @classmethod
    def of_bytes(cls, desc: Descriptor, data: bytes) -> Blob:
        return cls(desc, lambda: io.BytesIO(data))

    @classmethod
    def of_file(cls, desc: Descriptor, path: Path) -> Blob:
        return cls(desc, lambda: path.open("rb"))

    @classmethod
    def empty(cls) -> Blob:
        """The empty descriptor's blob (``{}``: :mod:`ocibridge.oci.empty`)."""
        return cls.of_bytes(empty_descriptor(), EMPTY_JSON)


class ArtifactSource(OneManifest):
    """A read-only store of one manifest and the blobs given with it; nothing else is here."""

    def __init__(self, manifest: Descriptor, data: bytes, blobs: Sequence[Blob]):
        self.manifest, self._data = manifest, data
        self._blobs = {blob.desc.digest: blob for blob in blobs}

    def describe(self) -> str:
        return f"artifact {self.manifest.digest}"

    def exists(self, desc: Descriptor) -> bool:
        return desc.digest == self.manifest.digest or desc.digest in self._blobs

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        if desc.digest == self.manifest.digest:
            return io.BytesIO(self._data)
        blob = self._blobs.get(desc.digest)
        if blob is None:
            raise NotFound(f"{self.describe()}: no blob {desc.digest}")
        # checked as read, as every store's blob is: a file changed since it was hashed fails here
        return verified(blob.open(), blob.desc.digest, blob.desc.size)  # type: ignore[return-value]

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        with self.open_blob(desc) as reader:
            return reader.read()

    def held_manifest(self) -> Descriptor:
        return self.manifest

    def successors(self, desc: Descriptor, data: bytes) -> list[Descriptor]:
        """The copy's view of the manifest: the blobs given, in order; the rest is the destination's."""
        return [blob.desc for blob in self._blobs.values()] if desc.digest == self.manifest.digest else []


def write_artifact(store: CopyTarget, manifest: Descriptor, data: bytes, blobs: Sequence[Blob] = (),
                   tags: Sequence[str] = (), *, progress: ProgressFn | None = None,
                   undo_on_failure: bool = False) -> CopyStats:
    """Write ``blobs`` (each unless there) and then the manifest ``data`` into ``store``, tagged
    with each of ``tags``; what was sent, in the copy's counts.

    A manifest already there is not sent again (nor its blobs) unless a tag is to point at it:
    then each tag costs one manifest write (one PUT on a registry). ``manifests_copied`` counts
    the manifest once, when it was new."""
    source = ArtifactSource(manifest, data, blobs)
    hooks = CopyHooks(undo_on_failure=undo_on_failure, successors=source.successors)
    stats = copy(source, manifest, store, tags[0] if tags else None, progress=progress, hooks=hooks)
    for tag in tags[1:]:
        store.push_manifest(manifest, data, tag)  # the bytes are in hand: one write per tag
    return stats


def retag(store: WritableStore, desc: Descriptor, tags: Sequence[str]) -> CopyStats:
    """Point ``tags`` at the manifest ``desc`` that ``store`` holds (read once, written per tag)."""
    return write_artifact(store, desc, store.fetch_bytes(desc), tags=tags)


def tag_held(store: WritableStore, desc: Descriptor, data: bytes, tag: str) -> None:
    """Point ``tag`` at the manifest ``desc`` (its bytes ``data``) whose blobs ``store`` holds:
    one write of the bytes, nothing asked first (a commit's tags, hubserver/repo/landing.py; a
    writer lease's renewal, hubserver/replicas/leaserecord.py)."""
    store.push_manifest(desc, data, tag)


def write_blob(store: CopyTarget, blob: Blob, *, progress: ProgressFn | None = None,
               rereadable: bool = True) -> bool:
    """One blob on its own (a cache filling itself): sent unless there; whether it was sent.
    ``rereadable``: False for a blob read once, as it arrives (a relay's), so that an upload the
    registry cut where it cannot go on fails saying how it was cut, not that its start could
    not be read again."""
    if store.exists(blob.desc):
        return False
    desc = blob.desc

    def reopen() -> BinaryIO:
        return counting(blob.open(), desc, progress)

    with reopen() as reader:
        store.push_blob(desc, reader, reopen=reopen if rereadable else None)
    return True


def reading(store: ReadableStore, desc: Descriptor) -> Blob:
    """A blob of another store, read from it (as often as an upload needs)."""
    return Blob(desc, partial(store.open_blob, desc))
