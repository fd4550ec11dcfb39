"""serve's registry store: the manifests its requests read, kept by digest across requests, and the
files of tar layers read as ranges of them (:mod:`.grouped`).

A command walks straight down and hands what it read to its next step, so a store keeps
nothing (docs/architecture-pull.md, "A pull's walk"). serve is another case: it holds one store per
repository for the life of the process, and request after request reads the same manifests (a
branch's commits, walked by every commit listing; the refs record, read again every few seconds;
a commit's page). A manifest named by digest cannot change, so its verified bytes answer the
next read by that digest, within a bound in bytes, oldest out first; a delete forgets it. A
manifest serve pushed is held as it was written: the commit that wrote it reads it back at once.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from typing import Any, BinaryIO

from ocibridge.hubserver.repo.grouped import Member
from ocibridge.oci.digest import is_digest, verified, verify_bytes
from ocibridge.oci.models import Descriptor, Index, Manifest
from ocibridge.stores.registry.client import RegistryClient
from ocibridge.stores.registry.download import BlobDownload
from ocibridge.stores.registry.store import RegistryStore

#: at most this many bytes of manifests are kept per repository (a manifest is usually a few KiB)
HELD_BYTES = 8 * 1024 * 1024


class HeldManifests:
    """Verified manifest bytes and their media type, by digest; thread-safe."""

    def __init__(self, limit: int = HELD_BYTES):
        self._limit = limit
        self._held = 0
        self._entries: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, digest: str) -> tuple[str, bytes] | None:
        with self._lock:
            found = self._entries.get(digest)
            if found is not None:
                self._entries.move_to_end(digest)
            return found

    def put(self, digest: str, media_type: str, data: bytes) -> None:
        """Keep ``data`` (already verified against ``digest``) unless it alone is over the limit."""
        if len(data) > self._limit:
            return
        with self._lock:
            self._drop(digest)
            self._entries[digest] = (media_type, data)
            self._held += len(data)
            while self._held > self._limit:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._held -= len(dropped)

    def forget(self, digest: str) -> None:
        with self._lock:
            self._drop(digest)

    def _drop(self, digest: str) -> None:
        old = self._entries.pop(digest, None)
        if old is not None:
            self._held -= len(old[1])


class ServedRegistryStore(RegistryStore):
    """A repository as serve holds it: a manifest read by digest once answers the later reads
    of it (``fetch_bytes``, ``resolve``, ``read_manifest``) without a request."""

    def __init__(self, client: RegistryClient, repository: str, **options: Any):
        super().__init__(client, repository, **options)
        self.held = HeldManifests()

    def _fetch_manifest(self, desc: Descriptor) -> tuple[str, bytes]:
        known = self.held.get(desc.digest)
        if known is not None:
            return known[0], verify_bytes(known[1], desc.digest, desc.size)
        media_type, data = super()._fetch_manifest(desc)
        self.held.put(desc.digest, media_type, data)
        return media_type, data

    def resolve(self, reference: str) -> Descriptor:
        known = self.held.get(reference) if is_digest(reference) else None
        if known is not None:
            return Descriptor(mediaType=known[0], digest=reference, size=len(known[1]))
        return super().resolve(reference)

    def _read_manifest(self, reference: str) -> tuple[Descriptor, bytes, Manifest | Index | None]:
        known = self.held.get(reference) if is_digest(reference) else None
        if known is not None:  # not parsed here: the caller's own parse reads it
            return Descriptor(mediaType=known[0], digest=reference, size=len(known[1])), known[1], None
        return super()._read_manifest(reference)

    def _answered(self, reference: str, digest: str, data: bytes,
                  content_type: str | None) -> tuple[Descriptor, Manifest | Index | None]:
        desc, node = super()._answered(reference, digest, data, content_type)
        self.held.put(digest, desc.mediaType, data)
        return desc, node

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        if isinstance(desc, Member):
            return self.open_member(desc)
        return super().open_blob(desc)

    def open_member(self, member: Member) -> BinaryIO:
        """A file of a tar layer (:mod:`.grouped`): the range of the layer that holds it, checked
        against the file's own digest."""
        if not member.size:  # no range to ask for
            return verified(io.BytesIO(), member.digest, 0, what="grouped file")  # type: ignore[return-value]  # as below
        raw = super().open_blob_range(member.within, member.offset, member.offset + member.size)
        return verified(raw, member.digest, member.size, what="grouped file")  # type: ignore[return-value]  # a verifying read()-stream where the Store protocol names BinaryIO

    def open_blob_range(self, desc: Descriptor, start: int, end: int | None = None, *,
                        probe: bool = False) -> BlobDownload:
        """Bytes ``[start, end)`` of a blob, or of a :class:`.grouped.Member` (that range of its layer)."""
        if isinstance(desc, Member):
            stop = desc.size if end is None else min(end, desc.size)
            return super().open_blob_range(desc.within, desc.offset + start, desc.offset + stop, probe=probe)
        return super().open_blob_range(desc, start, end, probe=probe)

    def push_manifest(self, desc: Descriptor, data: bytes, tag: str | None = None) -> None:
        """Written and accepted: its bytes (checked against ``desc`` before the PUT) answer the
        reads that follow, such as a commit's landing (landing.py), without asking them back."""
        super().push_manifest(desc, data, tag)
        self.held.put(desc.digest, desc.mediaType, data)

    def delete_manifest(self, desc: Descriptor) -> None:
        self.held.forget(desc.digest)
        super().delete_manifest(desc)
