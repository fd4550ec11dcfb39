"""The referrers of one registry repository: the registry's referrers API where it has one, the
OCI 1.1 fallback index (tag ``sha256-<hex>``) where it does not, which a push of a manifest with
a ``subject`` keeps up to date. A listed referrer the registry no longer holds is left out, with
one notice; the manifests read to tell are handed to their reader (:meth:`RegistryReferrers.read`).
RegistryStore (store.py) hands its manifest reads and writes to this.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

import httpx

from ocibridge.core import notices
from ocibridge.errors import NotFound, OcibridgeError, RegistryError
from ocibridge.oci.bookkeeping import referrer_tag
from ocibridge.oci.digest import split_digest
from ocibridge.oci.mediatypes import OCI_INDEX
from ocibridge.oci.models import Descriptor, Index, Manifest, parse_manifest_bytes
from ocibridge.stores.registry.manifestbody import ACCEPT_MANIFESTS, media_type_of


def fallback_tag(digest: str) -> str:
    """The OCI 1.1 referrers tag schema: ``sha256:abc…`` → ``sha256-abc…``."""
    algorithm, hexpart = split_digest(digest)
    return f"{algorithm}-{hexpart}"[:128]


def subject_of(data: bytes, media_type: str) -> Descriptor | None:
    """The ``subject`` a manifest names, None for none (or for bytes that are no manifest)."""
    try:
        return parse_manifest_bytes(data, media_type).subject
    except OcibridgeError:
        return None


class RepositoryManifests(Protocol):
    """What the referrers need of the repository's store: its manifest requests."""

    def describe(self) -> str: ...
    def fetch_bytes(self, desc: Descriptor) -> bytes: ...
    def _path(self, kind: str, ref: str = "") -> str: ...
    def _send(self, method: str, path: str, *, push: bool = False, **kw: Any) -> httpx.Response: ...
    def _fail(self, response: httpx.Response, push: bool = False) -> RegistryError: ...
    def _get_manifest(self, reference: str) -> tuple[bytes, httpx.Response]: ...
    def _put_manifest(self, desc: Descriptor, data: bytes, reference: str) -> httpx.Response: ...
    def push_manifest(self, desc: Descriptor, data: bytes, tag: str | None = None) -> None: ...


class RegistryReferrers:
    """Reads and keeps the referrers of one repository; thread-safe."""

    def __init__(self, store: RepositoryManifests):
        self._store = store
        self._api: bool | None = None  # whether the registry answers the referrers API
        self._lock = threading.Lock()
        self._dangling: set[str] = set()  # listed referrers found gone: told once

    def listed(self, desc: Descriptor, artifact_type: str | None = None) -> list[Descriptor]:
        """The manifests whose ``subject`` is ``desc``, as the referrers API or the fallback index
        lists them, less those the registry no longer holds (:meth:`_held`)."""
        return self.read(desc, artifact_type)[0]

    def read(self, desc: Descriptor, artifact_type: str | None = None) -> tuple[list[Descriptor], dict[str, bytes]]:
        """:meth:`listed`, and each listed referrer's manifest as :meth:`_held` read it (by
        digest): handed to its reader, which then asks the registry nothing more."""
        index = self._from_api(desc, artifact_type)
        if index is None:
            index = self.fallback_index(desc.digest)
        found = index.manifests if index else []
        if artifact_type:
            found = [d for d in found if d.artifactType == artifact_type]
        listed, read = [], {}
        for ref in found:
            held = self._held(ref, desc)
            if held is False:
                continue
            listed.append(ref)
            if isinstance(held, bytes):
                read[ref.digest] = held
        return listed, read

    def _held(self, referrer: Descriptor, subject: Descriptor) -> bytes | bool:
        """The listed referrer's manifest, read whole (False: the registry no longer holds it;
        True: there, but not readable as listed, which its reader says). A fallback index (or
        a referrers API) can name one deleted since, by hand or by a garbage collection that
        found it untagged (pushed before referrers had their tag, or by another tool): it is
        skipped with one notice, and what remains is judged."""
        try:
            return self._store.fetch_bytes(referrer)
        except NotFound:
            with self._lock:
                told = referrer.digest in self._dangling
                self._dangling.add(referrer.digest)
            if not told:
                notices.say(f"{self._store.describe()}: referrer {referrer.digest} of {subject.digest} is listed "
                            "but no longer in the registry (deleted, or garbage-collected): skipped")
            return False
        except OcibridgeError:
            return True  # there, but not readable as listed: its reader says why

    def _from_api(self, desc: Descriptor, artifact_type: str | None) -> Index | None:
        if self._api is False:
            return None
        params = {"artifactType": artifact_type} if artifact_type else None
        response = self._store._send("GET", self._store._path("referrers", desc.digest), params=params,
                                     headers={"Accept": OCI_INDEX})
        kind = media_type_of(response.headers.get("content-type"))
        if response.status_code == 200 and kind == OCI_INDEX:
            self._api = True
            parsed = parse_manifest_bytes(response.content, OCI_INDEX)
            return parsed if isinstance(parsed, Index) else None
        if response.status_code == 200:
            # Not an index (a registry's HTML or JSON page for an unknown route, a proxy
            # rewriting the type): no API here. Failing the copy on a 200 helps nobody.
            self._api = False
            return None
        if response.status_code in (404, 405, 400):
            self._api = False
            return None
        raise self._store._fail(response)

    def fallback_index(self, digest: str) -> Index | None:
        try:
            data, _ = self._store._get_manifest(fallback_tag(digest))
        except NotFound:
            return None
        parsed = parse_manifest_bytes(data, OCI_INDEX)
        return parsed if isinstance(parsed, Index) else None

    def keep(self, desc: Descriptor, data: bytes) -> None:
        """What :meth:`.store.RegistryStore.keep_referrer` does: one HEAD of the bookkeeping tag;
        with it, listed as a referrer (:meth:`keep_listed`); without, the manifest pushed again."""
        subject = subject_of(data, desc.mediaType)
        if subject is None:
            return
        keep = referrer_tag(desc.digest)
        response = self._store._send("HEAD", self._store._path("manifests", keep),
                                     headers={"Accept": ACCEPT_MANIFESTS})
        if response.status_code == 200 and response.headers.get("docker-content-digest") == desc.digest:
            self.keep_listed(subject, desc, data)
            return
        if response.status_code not in (200, 404):
            raise self._store._fail(response)
        self._store.push_manifest(desc, data, keep)

    def keep_listed(self, subject: Descriptor, desc: Descriptor, data: bytes) -> None:
        """``desc``, a referrer of ``subject`` held here, listed as one: a registry with the
        referrers API lists what it holds itself (asked once per repository); without, it is
        added to the fallback index where a write stopped between the two left it out."""
        if self._api is None:
            self._from_api(subject, None)
        if not self._api:
            self.add_to_fallback(subject, desc, data)

    def add_to_fallback(self, subject: Descriptor, desc: Descriptor, data: bytes) -> None:
        """Add ``desc`` to the ``sha256-<hex>`` index (the registry has no referrers API)."""
        manifest = parse_manifest_bytes(data, desc.mediaType)
        kind = manifest.artifactType or (manifest.config.mediaType if isinstance(manifest, Manifest) else None)
        entry = Descriptor(mediaType=desc.mediaType, digest=desc.digest, size=desc.size,
                           artifactType=kind, annotations=manifest.annotations)
        with self._lock:
            index = self.fallback_index(subject.digest) or Index(mediaType=OCI_INDEX)
            if any(m.digest == desc.digest for m in index.manifests):
                return
            index.manifests.append(entry)
            body = index.to_json_bytes()
            self._store._put_manifest(Descriptor.for_bytes(OCI_INDEX, body), body, fallback_tag(subject.digest))
