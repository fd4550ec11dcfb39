"""RegistryStore: one repository of an OCI distribution registry, as a Store (the façade).

Manifests go by ``/manifests/`` with the Accept list of every manifest type this project
reads; everything fetched is verified against its digest. Its parts: the tag list
(taglist.py), the referrers API or fallback index (referrers.py), mounts (mountrequest.py),
blob uploads (upload.py, ingest.py) and downloads (download.py). Every referrer is written
under a tag of its own, ``ocibridge-ref-<hex>``, so that garbage collection keeps it
(oci/bookkeeping.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, BinaryIO

import httpx

from ocibridge.core.closing import ClosesOnExit
from ocibridge.core.httpheaders import header_int
from ocibridge.errors import DigestMismatch, NotFound, OcibridgeError, RegistryError, TooLarge
from ocibridge.oci.bookkeeping import referrer_tag, short_of_tag
from ocibridge.oci.digest import (
    VerifyingReader,
    is_digest,
    new_hasher,
    sha256_bytes,
    verify_bytes,
)
from ocibridge.oci.mediatypes import ALL_MANIFEST_TYPES
from ocibridge.oci.models import Descriptor, Index, Manifest
from ocibridge.oci.reference import RegistryReference, check_tag
from ocibridge.stores.base import MAX_MANIFEST_BYTES, Reopen, blob_origin, is_manifest
from ocibridge.stores.ranged import RangedPlan
from ocibridge.stores.registry import errcodes
from ocibridge.stores.registry.artifacthint import artifact_hint
from ocibridge.stores.registry.blobhomes import BLOB_HOMES, remember_manifest_blobs
from ocibridge.stores.registry.blobstream import BytesHook, pull_scope
from ocibridge.stores.registry.bodies import read_prefix
from ocibridge.stores.registry.client import RegistryClient, TransferStats
from ocibridge.stores.registry.commitscan import check_commit_tag, commit_behind
from ocibridge.stores.registry.credentials import credential_function
from ocibridge.stores.registry.download import RANGE_PIECE, BlobDownload
from ocibridge.stores.registry.manifestbody import ACCEPT_MANIFESTS, capped_body, described, media_type_of
from ocibridge.stores.registry.mountrequest import MountRequests
from ocibridge.stores.registry.options import RegistryOptions
from ocibridge.stores.registry.referrers import RegistryReferrers, fallback_tag, subject_of

__all__ = ["ContentRejected", "RegistryStore", "fallback_tag", "open_repository"]

#: seconds before a manifest PUT answered DIGEST_INVALID is sent again (see _put_manifest)
MANIFEST_RETRY_PAUSE = 0.05


class ContentRejected(RegistryError, DigestMismatch):
    """The registry found an upload's bytes differ from its digest or size: a
    :class:`DigestMismatch` as every store raises it, and a :class:`RegistryError` with the
    registry's code."""


class RegistryStore(ClosesOnExit):
    """A repository on a registry; thread-safe (one client, locked token cache)."""

    def __init__(self, client: RegistryClient, repository: str, *,
                 chunk_size: int | None = None, on_bytes: BytesHook | None = None,
                 owns_client: bool = True, ranged_plan: RangedPlan | None = None):
        self.client = client
        #: the last tag list answered 404 (no such repository), not an empty list
        self.repository_unknown = False
        #: how a large blob is pulled into a file: parts in flight (see ..partial)
        self.ranged_plan = ranged_plan or RangedPlan()
        self.host = client.host
        self.repository = repository
        self.chunk_size = chunk_size
        self.on_bytes = on_bytes
        self._owns_client = owns_client
        # Blobs this store saw present or sent, and blobs a HEAD just found missing: a copy
        # checks each blob once (copy's own exists(), then push_blob without a second HEAD;
        # blobs a push ingested are not asked about again).
        self._present: set[str] = set()
        self._missing: set[str] = set()
        self._mounts = MountRequests(client, repository)  # and the sessions answered instead
        self._referrers = RegistryReferrers(self)  # the referrers API, or the fallback index

    # -- plumbing --------------------------------------------------------------------------
    @property
    def stats(self) -> TransferStats:
        return self.client.stats

    def describe(self) -> str:
        return f"{self.host}/{self.repository}"

    def close(self) -> None:
        self._mounts.close()
        if self._owns_client:
            self.client.close()

    def _path(self, kind: str, ref: str = "") -> str:
        return f"/v2/{self.repository}/{kind}/{ref}" if ref else f"/v2/{self.repository}/{kind}/"

    def _pull(self) -> tuple[str, ...]:
        return (pull_scope(self.repository),)

    def _send(self, method: str, path: str, *, push: bool = False, **kw: Any) -> httpx.Response:
        if push:  # the upload modules load with the first write: a pull has none (upload.py)
            from ocibridge.stores.registry.upload import push_scopes

            return self.client.send(method, path, scopes=push_scopes(self.repository), **kw)
        scopes = self._pull()
        return self.client.send(method, path, scopes=scopes, **kw)

    def _fail(self, response: httpx.Response, push: bool = False) -> RegistryError:
        verb = f"refused writing to {self.repository}" if push else f"refused reading {self.repository}"
        return self.client.error(response, verb)

    # -- reads -----------------------------------------------------------------------------
    def exists(self, desc: Descriptor) -> bool:
        manifest = is_manifest(desc)
        if not manifest and desc.digest in self._present:
            return True
        path = self._path("manifests" if manifest else "blobs", desc.digest)
        headers = {"Accept": ACCEPT_MANIFESTS} if manifest else None
        response = self._send("HEAD", path, headers=headers)
        if response.status_code == 404:
            if not manifest:
                self._missing.add(desc.digest)
            return False
        if response.status_code != 200:
            raise self._fail(response)
        length = header_int(response.headers.get("content-length"))
        if length is not None and length != desc.size:
            return False
        if not manifest:
            self._remember(desc.digest)
        return True

    def exists_now(self, desc: Descriptor) -> bool:
        """:meth:`exists`, asked of the registry even for a blob this process uploaded or saw:
        one no manifest names may have been collected since (distribution's garbage-collect,
        zot's and Harbor's untagged-blob cleanup)."""
        self._present.discard(desc.digest)
        return self.exists(desc)

    def open_blob(self, desc: Descriptor) -> BinaryIO:
        hasher = new_hasher(desc.digest)  # updated by the download's own thread
        raw = BlobDownload(self.client, self.repository, desc, self.on_bytes, hasher=hasher)
        return VerifyingReader(raw, desc.digest, desc.size, hasher=hasher)  # type: ignore[return-value]  # a verifying read()-stream where the Store protocol still names BinaryIO

    def open_blob_range(self, desc: Descriptor, start: int, end: int | None = None, *,
                        probe: bool = False) -> BlobDownload:
        """Bytes ``[start, end)`` of a blob, unverified (the caller hashes the whole blob);
        ``.ranged`` says whether the registry honoured the Range."""
        return BlobDownload(self.client, self.repository, desc, self.on_bytes, start=start, end=end,
                            piece=RANGE_PIECE, ask_range=probe)

    def fetch_bytes(self, desc: Descriptor) -> bytes:
        if desc.size > MAX_MANIFEST_BYTES:
            raise TooLarge(f"{desc.digest}: {desc.size} bytes is too large to read whole")
        if is_manifest(desc):
            return self._fetch_manifest(desc)[1]
        with self.open_blob(desc) as reader:
            data = reader.read()
        return verify_bytes(data, desc.digest, desc.size)

    def _fetch_manifest(self, desc: Descriptor) -> tuple[str, bytes]:
        """GET the manifest ``desc`` names: its media type (the answer's, else the descriptor's)
        and its bytes, checked against the digest and size."""
        data, got = self._get_manifest(desc.digest)
        verify_bytes(data, desc.digest, desc.size)
        media_type = media_type_of(got.headers.get("content-type"))
        media_type = media_type if media_type in ALL_MANIFEST_TYPES else desc.mediaType
        remember_manifest_blobs(self.client.base, self.repository, data, media_type,
                                on_disk=self.client.options.blob_homes_on_disk)
        return media_type, data

    def _get_manifest(self, reference: str) -> tuple[bytes, httpx.Response]:
        """GET a manifest, refusing bodies over the cap; verified when named by digest."""
        path = self._path("manifests", reference)
        response = self._send("GET", path, headers={"Accept": ACCEPT_MANIFESTS}, stream=True)
        try:
            if response.status_code == 404:
                read_prefix(response)
                raise NotFound(f"{self.describe()}: manifest {reference} not found")
            if response.status_code != 200:
                read_prefix(response)
                raise self._fail(response)
            data = capped_body(response, f"{self.describe()}: manifest {reference} is too large")
        except httpx.TransportError as e:
            raise RegistryError(f"registry {self.host}: reading manifest {reference}: {e}") from e
        finally:
            response.close()
        if is_digest(reference):
            verify_bytes(data, reference, what="manifest")
        return data, response

    def resolve(self, reference: str) -> Descriptor:
        """HEAD the manifest for its digest, type and size; GET when the registry omits them.
        Nothing read is kept here: what a command read is handed down by its caller."""
        if short_of_tag(reference):  # an abbreviated commit id: no tag has its name
            return self.resolve(commit_behind(reference, self.tags, self.resolve, self.describe()))
        path = self._path("manifests", reference)
        response = self._send("HEAD", path, headers={"Accept": ACCEPT_MANIFESTS})
        if response.status_code == 404:
            return self.resolve(commit_behind(reference, self.tags, self.resolve, self.describe()))
        if response.status_code != 200:
            raise self._fail(response)
        digest = response.headers.get("docker-content-digest")
        media_type = media_type_of(response.headers.get("content-type"))
        length = header_int(response.headers.get("content-length"))
        if digest and is_digest(digest) and media_type in ALL_MANIFEST_TYPES and length is not None:
            if is_digest(reference) and digest != reference:
                raise DigestMismatch(f"{self.describe()}@{reference}: registry answered {digest}")
            check_commit_tag(reference, digest, self.describe())
            return Descriptor(mediaType=media_type, digest=digest, size=int(length))
        data, got = self._get_manifest(reference)
        digest = reference if is_digest(reference) else sha256_bytes(data)
        return self._answered(reference, digest, data, got.headers.get("content-type"))[0]

    def read_manifest(self, reference: str) -> tuple[Descriptor, bytes]:
        """``GET`` the manifest a tag or digest names: its descriptor and verified bytes in one
        request, for the caller to hand down (nothing is kept here).
        A tag's bytes are checked against the ``Docker-Content-Digest`` the registry names."""
        desc, data, _ = self._read_manifest(reference)
        return desc, data

    def read_parsed(self, reference: str) -> tuple[Descriptor, bytes, Manifest | Index | None]:
        """:meth:`read_manifest`, with the parse the blob homes were learnt from on a ``GET``,
        handed over rather than made again (None where the bytes do not parse as the type the
        registry named: the caller's own parse says why)."""
        return self._read_manifest(reference)

    def _read_manifest(self, reference: str) -> tuple[Descriptor, bytes, Manifest | Index | None]:
        """The manifest, and its parse (None where it is not readable as the type named)."""
        if short_of_tag(reference):
            return self._read_manifest(commit_behind(reference, self.tags, self.resolve, self.describe()))
        try:
            data, got = self._get_manifest(reference)  # verified when named by digest
        except NotFound:
            return self._read_manifest(commit_behind(reference, self.tags, self.resolve, self.describe()))
        named = got.headers.get("docker-content-digest")
        if is_digest(reference):
            digest = reference
        elif named and is_digest(named):
            verify_bytes(data, named, what="manifest")
            digest = named
        else:
            digest = sha256_bytes(data)
        desc, node = self._answered(reference, digest, data, got.headers.get("content-type"))
        return desc, data, node

    def _answered(self, reference: str, digest: str, data: bytes,
                       content_type: str | None) -> tuple[Descriptor, Manifest | Index | None]:
        """A fetched manifest's descriptor (its media type from the answer, else from its bytes),
        and where its blobs live, learnt from one parse (None when the bytes are no manifest: the
        caller's own parse says so): what ``resolve`` and ``read_manifest`` both do after a GET."""
        check_commit_tag(reference, digest, self.describe())
        return described(self.client.base, self.repository, digest, data, content_type,
                         on_disk=self.client.options.blob_homes_on_disk)

    def tags(self) -> list[str]:
        """Every tag, following ``Link: <…>; rel="next"`` pages (taglist.py)."""
        from ocibridge.stores.registry.taglist import read_tags

        found = read_tags(self._send, self._path("tags", "list"), self.client.origin, self.host,
                          self.repository, self._fail)
        self.repository_unknown = found is None
        return found or []

    def referrers(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        """The manifests whose ``subject`` is ``desc``, less those the registry no longer holds
        (referrers.py)."""
        return self._referrers.listed(desc, artifact_type)

    def read_referrers(self, desc: Descriptor, artifact_type: str | None = None
                       ) -> tuple[list[Descriptor], dict[str, bytes]]:
        """:meth:`referrers`, with each one's manifest as the listing read it (stores/base.py
        ``ReadsReferrers``): its reader asks for it no second time."""
        return self._referrers.read(desc, artifact_type)

    # -- writes ----------------------------------------------------------------------------
    def push_blob(self, desc: Descriptor, reader: BinaryIO, *, reopen: Reopen | None = None) -> None:
        """Upload unless present. ``reopen`` (or a seekable reader) lets an interrupted upload
        restart or resume; ``chunk_size`` (store option) selects PATCH uploads."""
        from ocibridge.stores.registry.upload import BlobUpload, resumable
        from ocibridge.stores.registry.uploadstate import UploadState

        if desc.digest in self._missing:
            self._missing.discard(desc.digest)  # the caller's own exists() just asked
        elif self.exists(desc):
            self.stats.add(blobs_skipped=1)
            return
        chunked, state = resumable(desc.size, reader, reopen), None
        if chunked:  # chunks, and the session kept for a later run
            state = UploadState.open(self.client.base, self.repository, f"digest:{desc.digest}")
        session = self._mounts.session_for(desc.digest)
        try:
            BlobUpload(self.client, self.repository, desc, reader, chunk_size=self.chunk_size,
                       chunked=chunked, reopen=reopen, on_bytes=self.on_bytes, state=state,
                       session=session).run()
        except RegistryError as e:
            if e.code in errcodes.CONTENT_MISMATCH:  # the registry checked: the same error
                raise ContentRejected(str(e), e.status, e.code, e.credentials_sent) from None
            raise
        self._remember(desc.digest)

    def ingest_sends_unasked(self) -> bool:
        return True  # a copy hashes first and asks (HEAD, mount) before any byte goes out

    def ingest_blob(self, reader: BinaryIO, *, reopen: Reopen | None = None,
                    source_path: Path | None = None) -> tuple[str, int]:
        """Upload a blob whose digest is not known yet, hashing while sending (one read).
        ``source_path``, the file ``reader`` reads, lets a large upload continue in a later
        run (the session is found by the file's identity)."""
        from ocibridge.stores.registry.streamupload import StreamingIngest
        from ocibridge.stores.registry.upload import RESUMABLE_MIN
        from ocibridge.stores.registry.uploadstate import UploadState, file_identity

        size, state = None, None
        if source_path is not None:
            identity, file_size = file_identity(source_path)
            if file_size >= RESUMABLE_MIN:
                size = file_size
                state = UploadState.open(self.client.base, self.repository, identity)
        digest, got = StreamingIngest(self.client, self.repository, reader, reopen=reopen,
                                      on_bytes=self.on_bytes, size=size,
                                      chunk_size=self.chunk_size,
                                      state=state,
                                      name=str(source_path) if source_path is not None else None).ingest()
        self._remember(digest)
        return digest, got

    def _remember(self, digest: str) -> None:
        self._present.add(digest)
        self._missing.discard(digest)
        BLOB_HOMES.remember(self.client.base, digest, self.repository)

    def can_mount_from(self, src: object) -> bool:
        """Whether blobs of ``src`` can be mounted here: a repository of this same registry."""
        src = blob_origin(src)
        return isinstance(src, RegistryStore) and src.client.base == self.client.base

    def mount_from(self, desc: Descriptor, src: object) -> bool:
        """Cross-repository mount on this registry: from ``src`` when it is a repository of
        the same registry, else from a repository seen holding the blob, in this process or an
        earlier one (:mod:`.blobhomes`). False when none mounts: the caller uploads."""
        if is_manifest(desc):
            return False
        src = blob_origin(src)  # a re-labelling view mounts from the repository behind it
        base = self.client.base
        known = BLOB_HOMES.candidates(base, desc.digest)
        if self.repository in known and desc.digest not in self._missing and self.exists(desc):
            return False  # held here already (a re-push): the caller's exists() says so, unasked
        tried = {self.repository}
        origins = [src.repository] if isinstance(src, RegistryStore) and src.client.base == base else []
        for origin in [*origins, *known]:
            if origin not in tried:
                tried.add(origin)
                mounted = self._mounts.mount(desc, origin)
                if mounted:
                    self._remember(desc.digest)
                    return True
                if mounted is None and origin not in origins:
                    BLOB_HOMES.forget(base, desc.digest, origin)  # stale: deleted since
        return False

    def push_manifest(self, desc: Descriptor, data: bytes, tag: str | None = None) -> None:
        """PUT the manifest, by ``tag`` or by digest. A referrer (a manifest with a ``subject``:
        whatever attaches, signs, attests or copies it) is written under its bookkeeping tag
        too, in the same PUT when no other tag is asked for, so that garbage collection keeps
        it; then, without the referrers API, it is added to the subject's fallback index."""
        verify_bytes(data, desc.digest, desc.size, what="manifest")
        if tag is not None:
            check_tag(tag)
        subject = subject_of(data, desc.mediaType)
        keep = referrer_tag(desc.digest) if subject is not None else None
        response = self._put_manifest(desc, data, tag or keep or desc.digest)
        if keep is not None and tag not in (None, keep):
            self._put_manifest(desc, data, keep)
        if subject is not None and not response.headers.get("oci-subject"):
            self._referrers.add_to_fallback(subject, desc, data)

    def keep_referrer(self, desc: Descriptor, data: bytes) -> None:
        """A referrer found here already is given its bookkeeping tag when it lacks it (written
        before referrers had one, or by another tool): one HEAD when it has it, else the write
        :meth:`push_manifest` makes (the tag, and the fallback index where it is missing). With
        its tag but without the referrers API, the fallback index is read (one GET) and the
        referrer added where a write stopped between the two left it out."""
        self._referrers.keep(desc, data)

    def _put_manifest(self, desc: Descriptor, data: bytes, reference: str) -> httpx.Response:
        """PUT ``data`` (checked against ``desc`` by the caller). A ``DIGEST_INVALID`` answer
        is asked once more: distribution 2.8 rewrites a blob's link file in place whenever the
        blob is mounted or uploaded again (another copy's mount, tried before any existence
        check), and a manifest PUT that reads the link meanwhile finds it empty."""
        for attempt in range(2):
            response = self._send("PUT", self._path("manifests", reference), push=True, content=data,
                                  headers={"Content-Type": desc.mediaType})
            if response.status_code in (200, 201):
                break
            error = self._fail(response, push=True)
            if error.code == errcodes.MANIFEST_INVALID:
                raise artifact_hint(error, data, desc.mediaType)
            if attempt or error.code != errcodes.DIGEST_INVALID:
                raise error
            time.sleep(MANIFEST_RETRY_PAUSE)
        got = response.headers.get("docker-content-digest")
        if got and got != desc.digest:
            raise DigestMismatch(f"{self.describe()}: registry stored manifest {got}, "
                                 f"sent {desc.digest}")
        return response

    def tag(self, desc: Descriptor, tag: str) -> None:
        check_tag(tag)
        data, _ = self._get_manifest(desc.digest)
        self._put_manifest(desc, data, tag)

    def delete_manifest(self, desc: Descriptor) -> None:
        """DELETE the manifest by digest (every tag naming it goes with it, as the registry
        has it); 405 means the registry has deletes turned off."""
        scopes = (f"repository:{self.repository}:delete",)
        response = self.client.send("DELETE", self._path("manifests", desc.digest), scopes=scopes)
        if response.status_code == 404:
            raise NotFound(f"{self.describe()}@{desc.digest}: manifest not found")
        if response.status_code not in (200, 202):
            raise self.client.error(response, f"refused delete in {self.repository}")


def open_repository(ref: RegistryReference | None = None, options: RegistryOptions | None = None, *,
                    host: str | None = None, repository: str | None = None,
                    on_bytes: BytesHook | None = None, kind: type[RegistryStore] = RegistryStore,
                    **values: Any) -> RegistryStore:
    """A RegistryStore for ``ref`` (or ``host`` + ``repository``), reached as ``options`` say.

    Keyword ``values`` are option fields for a caller that has no RegistryOptions at hand
    (``max_retries=0``); a name that is not an option is refused. The credential function is
    built here, above the client, from the options' credential fields. ``kind``: a subclass
    to make (serve's, which keeps the manifests its requests read: hubserver/repo/heldmanifests.py).
    """
    options = (options or RegistryOptions()).updated(values)
    if ref is not None:
        host, repository = host or ref.registry, repository or ref.repository
    if not host or not repository:
        raise OcibridgeError("a registry store needs a host and a repository")
    defaults = RangedPlan()
    plan = RangedPlan(part_size=options.part_size or defaults.part_size,
                      parts_in_flight=options.parts_in_flight or defaults.parts_in_flight,
                      adaptive=options.parts_in_flight is None)
    client = RegistryClient(host, options, credentials=credential_function(options))
    return kind(client, repository, chunk_size=options.chunk_size, on_bytes=on_bytes, ranged_plan=plan)
