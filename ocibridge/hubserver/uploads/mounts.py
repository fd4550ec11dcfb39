"""Unchanged files mounted, not uploaded: a file whose SHA-256 another repository of
serve's registry already holds is not asked of the client again.

The LFS batch API answers such an oid as the Hub answers a blob it has ("already have it": no
upload action), and a commit naming it takes it as that repository's blob (:meth:`Mounts.blob`:
asked of the registry, not read), which the commit's copy mounts from there (the writer's
cross-repository mount) instead of sending it; its bytes are read only for what the artifact is
made of (a config.json, a weights header, a chunk table nobody made).

Which repositories count: those under serve's registry source (``host/path``) that serve's
blob homes saw holding the blob (commits serve pushed, manifests it resolved, earlier pushes
with the same cache) and that ``admits`` (the writer's own question, :mod:`ocibridge.hubserver.repo.mountable`:
its token could download the file there, its prefixes, private scope and gate all asked, and
the policy serve enforces lets serve serve it from there). Bytes a writer could never read are
never mounted: it uploads them. Knowledge only: a home that no longer holds the blob is a
failed read here, and the commit is refused as one naming content never uploaded.

The same reads give :mod:`.xet.dedupe` the bytes of a file a repository committed, when the
xorbs it was uploaded in are no longer kept (:meth:`Mounts.local`, :meth:`Mounts.held`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.repo.sources import RegistrySource, Repository, repo_parts
from ocibridge.hubserver.uploads.staging import Staging
from ocibridge.oci.models import Descriptor
from ocibridge.stores.registry.blobhomes import BLOB_HOMES
from ocibridge.stores.registry.store import RegistryStore

log = logging.getLogger("ocibridge.hubserver")

#: bytes read from the home repository at once
PIECE = 1024 * 1024


class Mounts:
    """Blobs of other repositories of ``source`` a commit may name (the module's docstring)."""

    def __init__(self, source: RegistrySource | None):
        self.source = source

    def home(self, repo_id: str, sha256: str, admits: Callable[[str], bool]) -> Repository | None:
        """A repository of the source (not ``repo_id``'s) seen holding ``sha256`` whose repo id
        ``admits`` accepts, or None."""
        source = self.source
        parts = repo_parts(repo_id)
        if source is None or parts is None:
            return None
        target = source.repository(parts)
        if target is None or not isinstance(target.store, RegistryStore):
            return None
        base = target.store.client.base
        head = f"{source.path}/" if source.path else ""
        own = target.shown.removeprefix(f"{source.host}/")
        for repository in BLOB_HOMES.candidates(base, f"sha256:{sha256}"):
            if repository == own or not repository.startswith(head):
                continue
            found = repo_parts(repository[len(head):])
            if found is not None and admits("/".join(found)):
                return source.repository(found)
        return None

    def own(self, repo_id: str) -> Repository | None:
        """``repo_id``'s repository of the source."""
        parts = repo_parts(repo_id)
        return self.source.repository(parts) if self.source is not None and parts is not None else None

    def held(self, repo_id: str, sha256: str, size: int, staging: Staging) -> bool:
        """Whether the bytes of the file ``sha256`` are here (staged as a file) or a blob of
        ``repo_id``'s repository (a file staged as held is one only if the registry has it)."""
        if staging.path_for(sha256) is not None:
            return True
        repo = self.own(repo_id)
        desc = Descriptor(mediaType="application/octet-stream", digest=f"sha256:{sha256}", size=size)
        try:
            return repo is not None and bool(repo.store.exists(desc))
        except OcibridgeError:
            return False

    def local(self, repo_id: str, sha256: str, size: int, staging: Staging) -> Path | None:
        """The bytes of the file ``sha256``: staged, else read (and verified) from ``repo_id``'s
        repository into staging; None when neither has it."""
        found = staging.path_for(sha256)
        repo = self.own(repo_id)
        if found is None and repo is not None and self._read(repo, sha256, size, staging):
            found = staging.path_for(sha256)
        return found

    def blob(self, repo_id: str, sha256: str, size: int | None, admits: Callable[[str], bool],
             listed_size: Callable[[], int | None] | None = None) -> tuple[Repository, Descriptor] | None:
        """The blob ``sha256`` of ``size`` bytes in a home ``admits`` accepts that holds it (asked:
        a home is only knowledge), and that home; None when there is none. No ``size`` (a copy's
        ``lfsFile``): the size ``listed_size`` gives once a home is admitted."""
        home = self.home(repo_id, sha256, admits)
        if home is not None and size is None and listed_size is not None:
            size = listed_size()
        if home is None or size is None:
            return None
        desc = Descriptor(mediaType="application/octet-stream", digest=f"sha256:{sha256}", size=size)
        try:
            if not home.store.exists(desc):
                return None
        except OcibridgeError as e:
            log.warning("sha256:%s: not found in %s: %s", sha256, home.shown, e)
            return None
        log.info("%s: sha256:%s is %s's (to be mounted, not uploaded)", repo_id, sha256, home.shown)
        return home, desc

    @staticmethod
    def _read(home: Repository, sha256: str, size: int, staging: Staging) -> bool:
        desc = Descriptor(mediaType="application/octet-stream", digest=f"sha256:{sha256}", size=size)
        try:
            with staging.new_file() as (path, fd), home.store.open_blob(desc) as blob, \
                    os.fdopen(os.dup(fd), "wb") as out:
                while piece := blob.read(PIECE):
                    out.write(piece)
                out.flush()
                staging.commit_file(path, sha256)
        except (OSError, OcibridgeError) as e:
            log.warning("sha256:%s: not read from %s: %s", sha256, home.shown, e)
            return False
        return True
