"""One cross-repository mount request (``POST …/blobs/uploads/?mount=&from=``) and the upload
sessions a registry answers instead of mounting, kept for the upload that follows."""

from __future__ import annotations

import contextlib
import threading

import httpx

from ocibridge.errors import RegistryError
from ocibridge.oci.models import Descriptor
from ocibridge.stores.registry.blobstream import pull_scope
from ocibridge.stores.registry.client import RegistryClient


class MountRequests:
    """Mounts into one repository; thread-safe. :meth:`close` ends the sessions no upload used."""

    def __init__(self, client: RegistryClient, repository: str):
        self.client, self.repository = client, repository
        self._lock = threading.Lock()
        self._sessions: dict[str, str] = {}  # upload sessions a mount answered with (202), by digest

    def mount(self, desc: Descriptor, origin: str) -> bool | None:
        """True: mounted. False: refused (no right to read ``origin``). None: not mounted,
        though the source could be read: ``origin`` does not hold the blob (or the registry
        never mounts)."""
        from ocibridge.stores.registry.upload import push_scopes  # with the first write (a pull has none)

        scopes = (*push_scopes(self.repository), pull_scope(origin))
        response = self.client.send(
            "POST", f"/v2/{self.repository}/blobs/uploads/", scopes=scopes, content=b"",
            params={"mount": desc.digest, "from": origin})
        if response.status_code == 201:
            self.client.stats.add(blobs_mounted=1)
            return True
        if response.status_code == 202 and response.headers.get("location"):
            # Not mounted (ECR mounts only blobs a manifest of the source names): the answer
            # is an upload session, which the upload that follows uses (the spec's intent).
            location = str(response.url.join(response.headers["location"]))
            with self._lock:
                stale = self._sessions.pop(desc.digest, None)
                self._sessions[desc.digest] = location
            if stale is not None:
                self._drop(stale)
            return None
        if response.status_code in (401, 403):
            return False  # no right to read the source: the copy streams it instead
        if response.status_code == 404:
            return None  # no such source repository (distribution answers 202; others 404)
        raise self.client.error(response, f"refused writing to {self.repository}")

    def session_for(self, digest: str) -> str | None:
        """The upload session a mount of ``digest`` was answered with, taken (used once)."""
        with self._lock:
            return self._sessions.pop(digest, None)

    def close(self) -> None:
        with self._lock:
            left, self._sessions = list(self._sessions.values()), {}
        for location in left:  # no upload came: tell the registry
            self._drop(location)

    def _drop(self, location: str) -> None:
        from ocibridge.stores.registry.upload import push_scopes

        with contextlib.suppress(RegistryError, httpx.HTTPError):
            self.client.send("DELETE", location, scopes=push_scopes(self.repository), retry=False)
