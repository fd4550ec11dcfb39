"""The store protocols every place of content implements, so one copy moves between any two.

A store is bound to one repository (a layout directory, a registry repository, an Ollama
model). References passed to it are a tag or a digest.

Two protocols say what every store of a kind does: :class:`ReadableStore` (a source: a view,
a built artifact, a pull cache) and :class:`WritableStore` (a destination). What only some
stores can do is a small named capability, a ``runtime_checkable`` Protocol that callers test
with ``isinstance`` (as oras-go asserts an interface): :class:`Mounting`, :class:`Ingesting`,
:class:`Transactional`, :class:`Closable`, :class:`BlobView`, :class:`ReadsByReference`,
:class:`CountsUploads`, :class:`ReadsReferrers`, :class:`RegistryRepository`. A copy's
destination need only be a :class:`CopyTarget`.
Nothing looks a capability up
by an attribute's name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable

from ocibridge.core.streams import Closable as Closable  # a store capability too (a connection pool)
from ocibridge.core.streams import close_if_closable
from ocibridge.errors import NotFound
from ocibridge.oci.mediatypes import ALL_MANIFEST_TYPES
from ocibridge.oci.models import Descriptor, Index, Manifest

#: Manifests and configs are small; anything larger is refused rather than read into memory.
MAX_MANIFEST_BYTES = 4 * 1024 * 1024

#: Opens a blob's source again from its start: an interrupted upload restarts or resumes from it.
Reopen = Callable[[], BinaryIO]


@runtime_checkable
class ReadableStore(Protocol):
    """describe / exists / open_blob / fetch_bytes / resolve / tags / referrers."""

    def describe(self) -> str:
        """A human-readable name for messages, e.g. ``oci:/data/store``."""
        ...

    def exists(self, desc: Descriptor) -> bool:
        """Whether the store holds this blob or manifest (by digest)."""
        ...

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        """A reader of the content; reading to EOF raises DigestMismatch on bad content and
        opening raises NotFound when the store lacks it."""
        ...

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        """Small content (manifest, config), verified against the descriptor; NotFound when absent."""
        ...

    def resolve(self, reference: str) -> Descriptor:
        """The descriptor of the manifest a tag or digest names; raises NotFound."""
        ...

    def tags(self) -> list[str]:
        """Every tag, sorted."""
        ...

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        """Manifests whose ``subject`` is ``desc``."""
        ...


@runtime_checkable
class CopyTarget(Protocol):
    """What a copy needs of its destination, and no more: whether content is there already,
    blobs (verified), then manifests (tagging them). A place that keeps something other than
    blobs (a directory's files) is a copy target without being a store."""

    def describe(self) -> str:
        """A human-readable name for messages."""
        ...

    def exists(self, desc: Descriptor) -> bool:
        """Whether the content is already there (by digest): the copy then skips it."""
        ...

    def push_blob(self, desc: Descriptor, reader: BinaryIO, *, reopen: Reopen | None = None) -> None:
        """Store a blob from a stream; verifies digest and size before it becomes visible.
        ``reopen`` opens the same content again from its start, for a store whose transfer
        can be interrupted and restarted (a registry); a local store may ignore it."""
        ...

    def push_manifest(self, desc: Descriptor, data: bytes, tag: str | None = None) -> None:
        """Store a manifest or index (verified), optionally tagging it."""
        ...


@runtime_checkable
class WritableStore(ReadableStore, CopyTarget, Protocol):
    """A store a copy can write to and read back: blobs first (verified), then manifests, then tags."""

    def tag(self, desc: Descriptor, tag: str) -> None:
        """Point ``tag`` at an existing manifest, replacing what it named before."""
        ...


#: The name most code uses for a store it only reads.
Store = ReadableStore


def is_manifest(desc: Descriptor) -> bool:
    return desc.mediaType in ALL_MANIFEST_TYPES


# -- capabilities -------------------------------------------------------------------------------
@runtime_checkable
class AsksNow(Protocol):
    """A store whose :meth:`~ReadableStore.exists` may answer from what this process saw (a
    registry: a blob it uploaded or found is taken as there), and that can ask again: a blob no
    manifest names yet may have been collected since."""

    def exists_now(self, desc: Descriptor) -> bool:
        """Whether the store holds ``desc`` now, asked of it."""
        ...


@runtime_checkable
class KeepsReferrers(Protocol):
    """A store whose referrers outlast its garbage collection only under a tag of their own (a
    registry: oci/bookkeeping.py), so that one a copy finds already there (written before
    referrers had their tag, or by another tool) is given it."""

    def keep_referrer(self, desc: Descriptor, data: bytes) -> None:
        """Tag the manifest ``desc`` (``data``, held here) as a referrer unless it is tagged so
        already; nothing for a manifest without a ``subject``."""
        ...


@runtime_checkable
class Ingesting(Protocol):
    """A store that accepts a blob whose digest nobody knows yet, hashing while it writes: a push
    then reads each new file once (not once to hash it and once to send it)."""

    def ingest_blob(self, reader: BinaryIO, *, reopen: Reopen | None = None,
                    source_path: Path | None = None) -> tuple[str, int]:
        """Store the stream's bytes; returns their digest and size. ``source_path``, the file
        the stream reads when there is one, lets a store continue an upload a killed run left."""
        ...

    def ingest_sends_unasked(self) -> bool:
        """Whether ingesting sends bytes over a network before the store could say it holds
        them (a registry): a copy then hashes first and asks, so no byte it holds is sent
        again. A local store (a layout) ingests: a blob it holds costs one local write."""
        ...


@dataclass(frozen=True)
class PendingBlob:
    """A blob of a source whose digest nobody knows yet (a file a push has not hashed)."""

    key: Descriptor  # stands for it in progress reports until its digest is known
    open: Reopen  # its content, from the start, as often as needed
    settle: Callable[[str, int], None]  # tells the source the digest and size it turned out to have
    source_path: Path | None = None  # the file it is read from, when there is one (upload resume)
    #: the digest and size ``open``'s stream checks itself at its end (a carton entry against
    #: its MANIFEST), when it does: see :class:`IngestingVouched`
    vouched: Descriptor | None = None


@runtime_checkable
class IngestingVouched(Protocol):
    """A store that writes a pending blob whose stream checks its own digest (raises at its end
    on a mismatch) without hashing it a second time: a carton pushed into a layout hashes each
    file once for MANIFEST, once for its chunk table, not a third time for the store."""

    def ingest_vouched(self, desc: Descriptor, reader: BinaryIO) -> None:
        """Store the stream under ``desc``, read to its end (where it raises if the content is
        not ``desc``'s); nothing is kept when it raises or its size is not ``desc.size``."""
        ...


@runtime_checkable
class PendingBlobs(Protocol):
    """A source with blobs of unknown digest: a copy into an :class:`Ingesting` store sends them
    first, hashing while sending, and the source learns their digests (which its manifest then
    names) instead of reading every file once to hash it and once more to send it."""

    def pending_blobs(self) -> list[PendingBlob]: ...


@runtime_checkable
class Transactional(Protocol):
    """A store that can take back what a failed write added (a layout, an Ollama models
    directory). A registry cannot: a blob may be shared through mounts, and DELETE is often
    refused, so uploaded blobs wait for the registry's garbage collection."""

    def removing_new_blobs_on_failure(self) -> AbstractContextManager[None]:
        """A block that, if it fails, removes the blobs it added that nothing uses."""
        ...


def close_store(store: object) -> None:
    """Release what ``store`` holds (a connection pool), when it holds anything."""
    close_if_closable(store)


@runtime_checkable
class VerifiedFile(Protocol):
    """A blob reader over a file verified a moment ago (the pull cache's): a writer may link
    it into place instead of copying it, and need not hash it again."""

    def read(self, n: int = -1, /) -> bytes: ...

    def link_to(self, target: Path, mode: int) -> int:
        """Make ``target`` (absent) hold the blob, with ``mode``; its size."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class BlobView(Protocol):
    """A store whose blobs are another store's, byte for byte (a re-labelling view): a registry
    can mount them from that store's repository instead of receiving them again."""

    def blob_source(self) -> ReadableStore: ...


def blob_origin(store: object) -> object:
    """The store that really holds ``store``'s blobs (through any number of views)."""
    while isinstance(store, BlobView):
        store = store.blob_source()
    return store


@runtime_checkable
class ReadsByReference(Protocol):
    """A store that hands over a manifest's descriptor and bytes in one read (a registry's
    ``GET`` by tag), where resolving first costs a round trip of its own."""

    def read_manifest(self, reference: str) -> tuple[Descriptor, bytes]:
        """The manifest a tag or digest names, verified; raises NotFound."""
        ...


def resolve_and_read(store: ReadableStore, reference: str) -> tuple[Descriptor, bytes]:
    """What ``reference`` names and its verified bytes: one request on a registry, where
    ``resolve`` then ``fetch_bytes`` make two (a ``HEAD``, then a ``GET``)."""
    if isinstance(store, ReadsByReference):
        return store.read_manifest(reference)
    desc = store.resolve(reference)
    return desc, store.fetch_bytes(desc)


@runtime_checkable
class ReadsParsed(Protocol):
    """A store that parses a manifest as it reads it (a registry, to learn where its blobs
    live): the parse is handed over with the bytes rather than made twice."""

    def read_parsed(self, reference: str) -> tuple[Descriptor, bytes, Manifest | Index | None]:
        """:func:`resolve_and_read`'s answer, with the parse this read made (None: it made none)."""
        ...


def read_parsed(store: ReadableStore, reference: str) -> tuple[Descriptor, bytes, Manifest | Index | None]:
    """What ``reference`` names, its verified bytes and the parse the store made of them as it
    read them (None when it made none: the caller parses, once)."""
    if isinstance(store, ReadsParsed):
        return store.read_parsed(reference)
    desc, data = resolve_and_read(store, reference)
    return desc, data, None


@runtime_checkable
class ReadsReferrers(Protocol):
    """A store that reads each referrer it lists (a registry: to leave out one listed but no
    longer held): the verified bytes it read are handed over with the list, not asked again."""

    def read_referrers(self, desc: Descriptor, artifact_type: str | None = None
                       ) -> tuple[list[Descriptor], dict[str, bytes]]:
        """:meth:`ReadableStore.referrers`, with the manifests read while listing, by digest."""
        ...


@dataclass
class HeldReferrers:
    """The referrers of a subject, with what the listing read of them: a reader takes a
    referrer's manifest from here (:meth:`manifest`), read once whichever store lists it."""

    store: ReadableStore
    listed: list[Descriptor]
    read: dict[str, bytes]

    def __iter__(self) -> Iterator[Descriptor]:
        return iter(self.listed)

    def known(self, ref: Descriptor) -> bytes | None:
        """The bytes the listing read of ``ref`` (verified), None where it read none."""
        return self.read.get(ref.digest)

    def manifest(self, ref: Descriptor) -> bytes:
        """The manifest of ``ref``: as the listing read it, else read now."""
        known = self.known(ref)
        return known if known is not None else self.store.fetch_bytes(ref)


def referrers_read(store: ReadableStore, desc: Descriptor, artifact_type: str | None = None) -> HeldReferrers:
    """``store.referrers(desc)``, with the manifests a :class:`ReadsReferrers` store read while listing."""
    if isinstance(store, ReadsReferrers):
        listed, read = store.read_referrers(desc, artifact_type)
        return HeldReferrers(store, listed, read)
    return HeldReferrers(store, store.referrers(desc, artifact_type), {})


class UploadCounts(Protocol):
    """What a store counted of the blob bytes it sent over the wire."""

    bytes_uploaded: int  # really sent, a retry's again
    bytes_resumed: int  # an upload continued from, sent by an earlier run


@runtime_checkable
class CountsUploads(Protocol):
    """A store that counts what it sends over the wire beside the copy's own counts (a
    registry): a push reports the bytes really sent, which the copy cannot know."""

    @property
    def stats(self) -> UploadCounts: ...


@runtime_checkable
class RegistryRepository(Protocol):
    """A store that is one repository of a registry, asked directly: where its content
    lives, so a later run can check a tag there with one request."""

    host: str
    repository: str


@runtime_checkable
class Mounting(Protocol):
    """A store that can take a blob by reference from another store of the same server
    (a registry's cross-repository mount) instead of receiving its bytes."""

    def can_mount_from(self, src: object) -> bool: ...

    def mount_from(self, desc: Descriptor, src: object) -> bool: ...


class OneManifest(ABC):
    """The reading side every store holding a single manifest shares (an artifact being
    written, a cached snapshot's source, a view of one model): only that manifest's digest
    resolves; it has no tags and no referrers."""

    @abstractmethod
    def describe(self) -> str: ...

    @abstractmethod
    def held_manifest(self) -> Descriptor:
        """The one manifest this store holds."""

    def resolve(self, reference: str) -> Descriptor:
        held = self.held_manifest()
        if reference == held.digest:
            return held
        raise NotFound(f"{self.describe()}: only {held.digest} is resolved here")

    def tags(self) -> list[str]:
        return []

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        return []
