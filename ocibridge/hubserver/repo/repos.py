"""The Hub's repositories as the writes see them, with no HTTP in it: the catalog and the file
lists, the branches' locks, the repositories made and not committed to yet, and what the other
rooms lend (staging, other repositories' blobs, the writer lease: :mod:`.ports`), with the
questions every write asks (a branch's head, whether a repository exists, whether an upload is
staged for it). The commit path (:mod:`.committing`) and the edits (:mod:`.deletes`,
:mod:`.moves`, :mod:`.refedits`, :mod:`.squash`, :mod:`.creation`) work over it; the routes of
``writeroutes/`` and ``lfs/`` hand it what a request named.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.repo.branchlocks import Branches
from ocibridge.hubserver.repo.catalog import Catalog, Resolved
from ocibridge.hubserver.repo.commits import BadCommit, UploadCollected
from ocibridge.hubserver.repo.files import FileLists, ModelFiles, read_small
from ocibridge.hubserver.repo.mountable import admitted
from ocibridge.hubserver.repo.pendingrepos import CreatedRepos
from ocibridge.hubserver.repo.ports import Author, BlobHomes, UploadStaging, WriterLease
from ocibridge.hubserver.repo.refnames import HEADS, TAGS
from ocibridge.hubserver.repo.sources import COMMIT, RepoNotFound, Repository, RevisionNotFound, repo_parts
from ocibridge.oci.models import Descriptor
from ocibridge.stores.base import AsksNow, Store

log = logging.getLogger("ocibridge.hubserver")


class _NoLease:
    """No writer lease: every write is taken here (until serve hands its own: replicas/lease.py)."""

    def ensure(self) -> None:
        pass

    def confirm(self) -> None:
        pass


class Repos:
    """The repositories of ``catalog`` as the writes share them (the module's docstring);
    ``created``: the folder of the markers of repositories made here without a commit."""

    def __init__(self, catalog: Catalog, lists: FileLists, staging: UploadStaging, mounts: BlobHomes,
                 created: Path):
        self.catalog = catalog
        self.lists = lists
        self.staging = staging
        self.mounts = mounts  # other repositories' blobs a commit may mount (uploads/mounts.py)
        self.branches = Branches()  # one lock a branch: commits and ref creations take it
        self.created = CreatedRepos(created)  # made, not committed to yet
        self.lease: WriterLease = _NoLease()  # serve's writer lease (replicas/lease.py), once it has one

    def first_repository(self, repo_id: str) -> Repository | None:
        """Where a new repository ``repo_id`` goes: its place in the first source (None: none)."""
        parts = repo_parts(repo_id)
        return self.catalog.sources[0].repository(parts) if parts is not None and self.catalog.sources else None

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

    def branch_listing(self, repo_id: str, branch: str) -> tuple[Resolved, ModelFiles] | None:
        """The branch's head and its files (None when it has none yet)."""
        head = self.head(repo_id, branch)
        return None if head is None else (head, self.lists.of(head))

    def branch_files(self, repo_id: str, branch: str) -> dict[str, str]:
        """path -> sha256 of the branch's head ({} when it has none yet)."""
        listing = self.branch_listing(repo_id, branch)
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
        return (revision.removeprefix("refs/heads/") or "main") == "main" and self.created.has(repo_id)

    # -- what is uploaded for a repository --------------------------------------------------------
    def mount_home(self, author: Author, repo_id: str, sha256: str) -> Repository | None:
        """Another repository ``author`` may take the file ``sha256`` from (could download it
        there, and the policy serves it from there: :mod:`.mountable`), or None: it uploads the bytes."""
        return self.mounts.home(repo_id, sha256, admitted(self.catalog, author, sha256))

    def uploaded(self, repo_id: str, sha256: str) -> bool:
        """Whether ``sha256`` is staged for ``repo_id``: uploaded for it (``Staging.pinned``); a file
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
        """The registry blob an upload staged as held is (``Staging.commit_held``), asked of
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
