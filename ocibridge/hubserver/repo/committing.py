"""The one commit path of a Hub repository: the files a commit names (uploaded over LFS or Xet into
:mod:`.uploads.staging`, inline, kept from the branch's head, or mounted from another repository) become a
new manifest on the branch, its lock held. The commit route, a repository's first commit
(``create_repo``) and an empty branch (``create_branch(empty)``) all land through it; no HTTP here.

Who commits is an :class:`.ports.Author` (a write grant, handed over by the
routes), the staging and the lease are the other rooms' (:mod:`.ports`).

The commit hands the builder what serve proved of each file (:class:`ocibridge.model.known.KnownFile`:
an upload's SHA-256 and the chunk table staging made as its bytes came, a file of the parent
commit or of another repository as the registry blob it is) and :mod:`.publishing` writes the
artifact push makes of those files, hashing none of them again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ocibridge.chunks.chunktable import DEFAULT_CHUNK_SIZE
from ocibridge.core.fsutil import writev_all
from ocibridge.errors import OcibridgeError
from ocibridge.hubserver.repo import commits
from ocibridge.hubserver.repo.catalog import Resolved
from ocibridge.hubserver.repo.files import HubFile
from ocibridge.hubserver.repo.grouped import Member, WholeGroups
from ocibridge.hubserver.repo.mountable import admitted
from ocibridge.hubserver.repo.ports import UNLIMITED, Author, QuotaCheck
from ocibridge.hubserver.repo.publishing import Publishing, publish
from ocibridge.hubserver.repo.regularfiles import REGULAR, annotation
from ocibridge.hubserver.repo.reponames import type_of
from ocibridge.hubserver.repo.repos import Repos
from ocibridge.hubserver.repo.sources import CREATED, RepoNotFound, commit_of, repo_parts
from ocibridge.kinds.hf.repotype import DATASET

if TYPE_CHECKING:
    from ocibridge.chunks.chunktable import ChunkTable
    from ocibridge.model.known import KnownFile
    from ocibridge.stores.base import Store

log = logging.getLogger("ocibridge.hubserver")


@dataclass(frozen=True)
class Landed:
    """What a commit did (its audit line: audit.py)."""

    commit: str
    digest: str
    added: Sequence[str] = ()
    removed: Sequence[str] = ()
    bytes_received: int = 0


class Committer:
    """Commits, over the repositories the writes share; ``publishing``: how commits are written
    (None: this serve refuses them)."""

    def __init__(self, repos: Repos, publishing: Publishing | None, quotas: QuotaCheck = UNLIMITED):
        self.repos = repos
        self.staging = repos.staging
        self.publishing = publishing
        self.quotas = quotas  # serve --quotas: a commit past its namespace's is refused unpushed

    def stage_bytes(self, repo_id: str, inline: commits.Inline, content: bytes, writer: str) -> None:
        sha = inline.sha256
        if self.staging.pin(sha, repo_id, writer):
            return
        with self.staging.reserve(len(content), repo_id, writer), self.staging.new_file() as (tmp, fd):
            writev_all(fd, [content])
            self.staging.commit_file(tmp, sha, hashed=sha)  # the sha256 of these very bytes (read_line)
        self.staging.pin(sha, repo_id, writer)

    def first_commit(self, repo_id: str, author: Author, files: dict[str, bytes] | None = None) -> Landed:
        """The Hub's first commit of a new repository (:mod:`.initial`): its ``.gitattributes``
        and the ``files`` the create sent (path -> bytes: one of them may replace it)."""
        from ocibridge.hubserver.repo import initial

        contents = {".gitattributes": initial.GITATTRIBUTES, **(files or {})}
        payload = commits.CommitRequest(summary=initial.SUMMARY)
        for path, content in contents.items():  # regular files, as on the Hub
            payload.inline[path] = commits.Inline.of(content)
        return self.empty_commit(repo_id, "main", author, payload, contents, first=True)

    def empty_commit(self, repo_id: str, branch: str, author: Author, payload: commits.CommitRequest,
                     contents: dict[str, bytes], *, first: bool = False) -> Landed:
        """A commit of ``branch`` with no parent: the repository's first (``first``: no head yet),
        or a branch made empty (``createBranch({empty})``, its ref already placed): its files are
        ``payload``'s inline ones (``contents``: their bytes, staged here)."""
        if self.publishing is None:
            raise commits.BadCommit("this serve does not publish (its application was built without publishing)")
        for path, inline in payload.inline.items():
            self.stage_bytes(repo_id, inline, contents[path], author.staged_as)
        return self.commit(repo_id, branch, payload, author, first=first, orphan=True)

    def commit(self, repo_id: str, branch: str, payload: commits.CommitRequest, author: Author, *,
                first: bool = False, orphan: bool = False) -> Landed:
        """Build and write the commit, the branch locked; what it did (its commit oid, ...).
        ``first``: the repository's first commit (:meth:`first_commit`): it has no head yet;
        ``orphan``: the commit keeps nothing of the branch's head, nor names it as its parent."""
        assert self.publishing is not None
        with self.repos.branches.lock(repo_id, branch):
            head = None if first else self.repos.head(repo_id, branch)  # a tag's name: BadCommit
            kept = None if orphan else head  # the commit the new one is made on
            if payload.parent is not None and (head is None or head.commit != payload.parent[:40].lower()):
                raise commits.StaleParent("The branch was updated since you opened this page. Please refresh and "
                                          f"try again. ({branch} is at {head.commit if head else 'no commit'}, "
                                          f"not {payload.parent})")
            parent: dict[str, str] = {}
            parent_regular: dict[str, str] = {}  # the parent's regular files: kept ones keep their kind
            held: Callable[[str], KnownFile] = _nothing
            if kept is not None:
                files = self.repos.lists.of(kept)
                parent = {path: f.sha256 for path, f in files.files.items()}
                parent_regular = {path: f.git_blob for path, f in files.files.items() if f.git_blob is not None}
                held = _Parent(kept, files.files, WholeGroups(self.repos.lists.cache, kept.repo.store)).known
            mounts: dict[str, Store] = {}
            tree = commits.new_tree(parent, payload, self._staged_or_mounted(repo_id, payload, mounts, author), held)
            parts = repo_parts(repo_id)
            repo = head.repo if head is not None else self.repos.catalog.sources[0].repository(parts or [])
            if repo is None:
                raise RepoNotFound(f"{repo_id}: no source can hold it")
            tag = head.tag if head is not None and head.tag else self.repos.catalog.default_tag  # refnames.py's
            if repo.located(tag, "") is None:
                raise commits.BadCommit(f"{repo.shown}: not a place serve can push to")
            annotations = {commits.SUMMARY: payload.summary or "Upload files", commits.AUTHOR: author.name,
                           CREATED: commits.commit_time()}
            if payload.description:
                annotations[commits.DESCRIPTION] = payload.description
            if kept is not None:
                annotations[commits.PARENT] = kept.top.digest  # the digest: the walk needs no tag
            regular = commits.regular_files(parent_regular, payload, tree)
            if regular:  # none: every file in git-lfs, as a manifest without the record says
                annotations[REGULAR] = annotation(regular)
            self.quotas.adding_blobs(repo_id, {f.digest: f.size for f in tree.values()})  # QuotaExceeded: 403
            # named as push names a directory of these files: after the repository
            digest = publish(self.publishing, tree, (parts or [repo_id])[-1], repo, tag, annotations, mounts,
                             self.repos.lease.ensure, dataset=type_of(repo_id) == DATASET)
            # answered as landed only while the writer lease still names this serve: a takeover
            # meanwhile may not keep it (replicas/writerlease.py), so it is not acknowledged
            self.repos.lease.confirm()
            if kept is not None:
                _tag_history(kept, tag)
            self.repos.created.discard(repo_id)
            landed = _landed(digest, parent, tree)
            self.quotas.landed(repo_id, digest)
            # the commit has landed: what it took from staging goes, unless another flow may name it
            named = [a.sha256 for a in payload.added] + [i.sha256 for i in payload.inline.values()]
            self.staging.release(named, repo_id, author.staged_as)
            log.info("%s: %s committed %s as %s", repo_id, author.name, branch, digest)
            return landed


    def _staged_or_mounted(self, repo_id: str, payload: commits.CommitRequest, mounts: dict[str, Store],
                           author: Author) -> Callable[[str], KnownFile | None]:
        """The upload of a SHA-256 staged for ``repo_id`` (with the chunk table staging kept),
        else the blob another repository holds that ``author`` could read there
        (:mod:`.uploads.mounts`, :mod:`.mountable`), noted in ``mounts`` so the copy mounts it
        rather than sends it: bytes it could never read are refused as never uploaded. A file
        staged for another repository only is neither: its writer never committed it, so naming
        its SHA-256 gives nobody else its bytes (:meth:`.Staging.pinned`)."""
        from ocibridge.model.known import KnownFile

        sizes = {added.sha256: added.size for added in payload.added}

        def staged(sha256: str) -> KnownFile | None:
            mine = self.staging.pinned(sha256, repo_id)
            found = self.staging.path_for(sha256) if mine else None
            if found is not None:
                return KnownFile.of_file(found, f"sha256:{sha256}", found.stat().st_size,
                                         self.staging.table_for(sha256))
            collected: commits.UploadCollected | None = None
            try:
                held = self.repos.held_blob(repo_id, sha256) if mine else None
            except commits.UploadCollected as e:  # said only if nothing else holds the bytes
                held, collected = None, e
            if held is not None:  # relayed as it was built (Staging.commit_held)
                store, desc = held
                return KnownFile.of_blob(store, desc, self.staging.table_for(sha256))
            admission = admitted(self.repos.catalog, author, sha256)
            mounted = self.repos.mounts.blob(repo_id, sha256, sizes.get(sha256), admission,
                                             lambda: admission.size)
            if mounted is None:
                if collected is not None:
                    raise collected
                return None
            home, desc = mounted
            mounts[desc.digest] = home.store
            return KnownFile.of_blob(home.store, desc)

        return staged


def _tag_history(head: Resolved, tag: str) -> None:
    """Give the branch's earlier commits their commit tags where they lack them (landing.py):
    a repository serve wrote before it tagged commits, or pushed to outside serve. The commit
    has landed already: a failure here is logged, and tried again at the next commit."""
    from ocibridge.hubserver.repo.history import COMMITS_MAX
    from ocibridge.hubserver.repo.landing import tag_ancestors
    from ocibridge.stores.base import WritableStore

    store = head.repo.store
    if not isinstance(store, WritableStore):
        return
    try:
        tag_ancestors(store, head.top.digest, head.repo.reference(tag), COMMITS_MAX)
    except (OcibridgeError, OSError) as e:
        log.warning("%s: the earlier commits of %s were not all tagged: %s", head.repo.shown, tag, e)


def _landed(digest: str, parent: dict[str, str], tree: dict[str, KnownFile]) -> Landed:
    """What a commit did to its branch: the paths it added (or changed) and removed, and the
    bytes of the content it brought that the branch did not hold."""
    added = [path for path, known in tree.items() if f"sha256:{parent.get(path)}" != known.digest]
    held = {f"sha256:{sha}" for sha in parent.values()}
    new = {tree[path].digest: tree[path].size for path in added if tree[path].digest not in held}
    return Landed(commit_of(digest), digest, tuple(added), tuple(sorted(parent.keys() - tree.keys())),
                  sum(new.values()))


class _Parent:
    """The files of the branch's head as the commit knows them: a raw layer is its blob (with
    the entry of the chunk table its manifest binds, fetched once when first needed), a file
    serve grouped into a tar layer read from that layer fetched whole once (:class:`.grouped.WholeGroups`);
    a file of another tar layer,
    the verified file of the model cache's snapshot the file list was made from."""

    def __init__(self, head: Resolved, files: dict[str, HubFile], groups: WholeGroups):
        self.head, self.files, self.groups = head, files, groups
        self._table: ChunkTable | None = None
        self._asked = False

    def known(self, rel: str) -> KnownFile:
        from ocibridge.model.known import KnownFile
        from ocibridge.oci.layerinfo import layer_mode

        found = self.files[rel]
        if isinstance(found.layer, Member):
            member = found.layer
            return KnownFile(member.digest, member.size, self.groups.opener(member), mode=member.mode)
        if found.layer is not None:
            table = self.table()
            chunks = table.for_layer(found.layer) if table is not None else None
            return KnownFile.of_blob(self.head.repo.store, found.layer, chunks,
                                     table.chunk_size if table is not None else DEFAULT_CHUNK_SIZE,
                                     layer_mode(found.layer))
        if found.local is None:
            raise commits.UnknownContent(f"{rel}: the branch's file is not at hand")
        return KnownFile.of_file(found.local, f"sha256:{found.sha256}", found.size)

    def table(self) -> ChunkTable | None:
        """The chunk table the head's manifest binds (None: none, or not to be had)."""
        if not self._asked:
            from ocibridge.chunks.bound import remote_bound_table

            self._table = remote_bound_table(self.head.repo.store, self.head.model)
            self._asked = True
        return self._table


def _nothing(rel: str) -> KnownFile:
    raise commits.UnknownContent(f"{rel}: not in the branch")
