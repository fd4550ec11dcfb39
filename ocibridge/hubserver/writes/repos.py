"""The Hub's repository routes of the write API (huggingface_hub's hf_api.py), and what every
write route shares: the sources, staging, who may write, the branches' locks, the repositories
made here without a commit yet.

    GET    /api/whoami-v2                  the token's name and scope (hf auth whoami)
    POST   /api/validate-yaml              a README's metadata, checked as the Hub checks it (:mod:`.cards`)

(create_repo and the settings: :mod:`.creating`; the deletes: :mod:`.deleting`.)

Every write needs a write token of ``--token-file`` (:class:`.access.Gate`): none sent or unknown
is the Hub's 401, a read token or another repository's is 403. A repo id that is not one
(``acme/../secret/vault``, a quoted ``/``, ``..``) is refused by its name first, the Hub's 400,
on every write route (:meth:`Repos.writer`), before anything is granted for it.
"""

from __future__ import annotations

import logging
from typing import TypeVar

from starlette.requests import Request

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.access import Access, Gate, Grant
from ocibridge.hubserver.answers import branch_of, in_thread
from ocibridge.hubserver.replicas.lease import Lease
from ocibridge.hubserver.repo.branchlocks import Branches
from ocibridge.hubserver.repo.catalog import Catalog, Resolved
from ocibridge.hubserver.repo.commits import BadCommit, UploadCollected
from ocibridge.hubserver.repo.created import CreatedRepos
from ocibridge.hubserver.repo.files import FileLists, ModelFiles, read_small
from ocibridge.hubserver.repo.refnames import HEADS, TAGS
from ocibridge.hubserver.repo.sources import (
    COMMIT,
    RegistrySource,
    RepoNotFound,
    Repository,
    RevisionNotFound,
    repo_parts,
)
from ocibridge.hubserver.settings import ServeSettings
from ocibridge.hubserver.uploads.mounts import Mounts
from ocibridge.hubserver.uploads.staging import Staging
from ocibridge.hubserver.writes.mountable import admitted
from ocibridge.oci.bookkeeping import LEASE_REPO
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import AsksNow, Store

log = logging.getLogger("ocibridge.hubserver")

_T = TypeVar("_T")


class Repos:
    """What the write routes share (the catalog, staging, the gate, the settings, branch locks, mounts,
    repositories made and not committed to yet, the writer lease) and the questions they all ask."""

    def __init__(self, catalog: Catalog, lists: FileLists, staging: Staging, gate: Gate, settings: ServeSettings):
        self.catalog = catalog
        self.lists = lists
        self.staging = staging
        self.gate = gate
        self.settings = settings
        self.branches = Branches()  # one lock a branch: commits and ref creations take it
        source = catalog.sources[0] if catalog.sources else None
        self.mounts = Mounts(source if isinstance(source, RegistrySource) else None)  # unchanged files
        self.created = CreatedRepos(staging.root.parent / "created")  # made, not committed to yet
        self.lease = Lease()  # the writer lease (replicas/lease.py): the application sets its own
        staging.writers = lambda: sum(1 for g in gate.grants if g.write)  # each one's share (uploads/shares.py)

    def base(self, request: Request) -> str:
        return self.settings.base(str(request.base_url))

    def writer(self, request: Request, repo_id: str | None) -> Grant:
        """The write grant of the request's token for ``repo_id`` (None: any); raises
        :class:`.access.Denied`, or :class:`InvalidRepoName` (400) for a name no repository has."""
        if repo_id is not None and repo_parts(repo_id) is None:
            raise InvalidRepoName(f"Invalid repo name: {repo_id!r} is not a repo id (NAME or ORG/NAME: letters, "
                                  "digits and single '.', '_', '-' between them)")
        if repo_id is not None and repo_parts(repo_id) == [LEASE_REPO]:
            raise InvalidRepoName(f"Invalid repo name: {repo_id!r} is serve's own repository (it keeps the writer "
                                  "lease: docs/serve.md, 'One writer, many readers'): choose another name")
        grant = self.gate.require(request, repo_id, Access.WRITE)
        assert grant is not None  # a write always names its writer
        return grant

    def writer_of(self, grant: Grant) -> str:
        """The name a write token's uploads are staged under (its Xet client name, which its Xet
        grant carries too): whose share of the staging budget they count in."""
        return self.gate.xet.client_of(grant.token)

    def mount_home(self, grant: Grant, repo_id: str, sha256: str) -> Repository | None:
        """Another repository the writer of ``grant`` may take the file ``sha256`` from (could
        download it there, :meth:`.Gate.may_take`, and the policy serves it from there:
        :mod:`.mountable`), or None: it uploads the bytes."""
        return self.mounts.home(repo_id, sha256, admitted(self.catalog, self.gate, grant, sha256))

    def uploaded(self, repo_id: str, sha256: str) -> bool:
        """Whether ``sha256`` is staged for ``repo_id``: uploaded for it (:meth:`.Staging.pinned`); a file
        staged for another repository only is neither answered as held nor committed here."""
        if not self.staging.pinned(sha256, repo_id):
            return False
        if self.staging.path_for(sha256) is not None:
            return True
        try:
            return self.held_blob(repo_id, sha256) is not None
        except UploadCollected:
            return False  # asked for again
        except OcibridgeError as e:  # the registry did not answer: the bytes are asked for again
            log.warning("%s: sha256:%s is held by the registry, which did not answer: %s", repo_id, sha256, e)
            return False

    def held_blob(self, repo_id: str, sha256: str) -> tuple[Store, Descriptor] | None:
        """The registry blob an upload staged as held is (:meth:`.Staging.commit_held`), asked of
        the registry now; None when there is none. A record whose blob the registry no longer
        has (collected: no manifest named it yet) is dropped, so the client is asked for the
        bytes again instead of a commit failing on them for good, and :class:`UploadCollected`
        says so. A registry that does not answer raises its error (a commit's 502), not "never
        uploaded"."""
        size = self.staging.held_size(sha256)
        own = self.mounts.own(repo_id) if size is not None else None
        if own is None or size is None:
            return None
        desc = Descriptor(mediaType="application/octet-stream", digest=f"sha256:{sha256}", size=size)
        present = own.store.exists_now(desc) if isinstance(own.store, AsksNow) else own.store.exists(desc)
        if not present:
            log.warning("%s: sha256:%s was uploaded to %s and is no longer there: it is to be uploaded again",
                        repo_id, sha256, own.shown)
            self.staging.drop_held(sha256)
            raise UploadCollected(f"sha256:{sha256} was uploaded, and {own.shown} removed it before a commit named it "
                                  "(registries collect blobs no manifest names yet): upload it again")
        return own.store, desc

    # -- what a branch holds -------------------------------------------------------------------
    def head(self, repo_id: str, branch: str) -> Resolved | None:
        """The branch's head; None when the repository exists (or was created here) without it;
        :class:`BadCommit` when ``branch`` names a Hub tag and no branch (commits go to branches).
        A commit id is resolved as one (the commit route refuses it with its own words)."""
        try:
            return self.catalog.resolve(repo_id, branch, ref=True, kind=None if COMMIT.fullmatch(branch) else HEADS)
        except RevisionNotFound as missing:
            if branch == "main":
                return None
            try:
                self.catalog.resolve(repo_id, branch, kind=TAGS)
            except RevisionNotFound:
                raise missing from None
            raise BadCommit(f"Invalid rev id: {branch} is a tag, not a branch: commits go to branches "
                            "(a tag stays where it was made)") from None
        except RepoNotFound:
            if branch == "main" and self.created.has(repo_id):
                return None
            raise

    async def branch_listing(self, repo_id: str, branch: str) -> tuple[Resolved, ModelFiles] | None:
        """The branch's head and its files (None when it has none yet)."""
        head = await in_thread(self.head, repo_id, branch)
        if head is None:
            return None
        return head, await in_thread(self.lists.of, head)

    async def branch_files(self, repo_id: str, branch: str) -> dict[str, str]:
        """path -> sha256 of the branch's head ({} when it has none yet)."""
        listing = await self.branch_listing(repo_id, branch)
        return {path: f.sha256 for path, f in listing[1].files.items()} if listing is not None else {}

    def branch_text(self, repo_id: str, branch: str, path: str, limit: int) -> str | None:
        """The text of the branch head's file ``path`` (verified); None when the branch or the
        file is missing, or the file is larger than ``limit`` bytes."""
        head = self.head(repo_id, branch)
        found = self.lists.of(head).files.get(path) if head is not None else None
        data = read_small(head, found, limit) if head is not None and found is not None else None
        return None if data is None else data.decode("utf-8", "replace")

    def exists(self, repo_id: str) -> bool:
        """Whether ``repo_id`` exists in a source (a deleted one does not)."""
        try:
            self.catalog.resolve(repo_id, "main")
        except RevisionNotFound:
            return True
        except RepoNotFound:
            return self.created.has(repo_id)
        return True

    def created_empty(self, repo_id: str, revision: str) -> bool:
        """``repo_id`` was made by ``create_repo`` here and ``revision`` is its (commit-less) main."""
        return branch_of(revision) == "main" and self.created.has(repo_id)


class InvalidRepoName(BadCommit):
    """A write names a repo id no repository can have (the Hub's 400)."""
