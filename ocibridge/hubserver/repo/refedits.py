"""Branches and tags made and moved (``create_branch``, ``create_tag``, ``create_branch(overwrite)``);
no HTTP here (the routes: ``writeroutes/refs.py``). A branch or tag is a registry tag; which of the two
it is, and which registry tag holds it when a branch and a tag share a name, the repository's refs
record says (:mod:`.refsrecord`, :mod:`.refnames`, :mod:`.clashes`). Each is made under the lock a
commit to it takes, so two creates of one name at once are one made and one refused, and a commit
to it waits until it is made.
"""

from __future__ import annotations

from ocibridge.hubserver.repo.catalog import Resolved
from ocibridge.hubserver.repo.clashes import place
from ocibridge.hubserver.repo.commits import BadCommit, CommitRequest
from ocibridge.hubserver.repo.committing import Committer
from ocibridge.hubserver.repo.ports import Author
from ocibridge.hubserver.repo.refnames import HEADS
from ocibridge.hubserver.repo.refsrecord import RECORD_LOCK, read_record, write_record
from ocibridge.hubserver.repo.repos import Repos
from ocibridge.hubserver.repo.sources import RevisionNotFound
from ocibridge.stores.base import WritableStore

#: the summary of an empty branch's commit
EMPTY_SUMMARY = "Empty branch"


def ref_exists(repos: Repos, repo_id: str, name: str, kind: str) -> bool:
    """Whether the ref ``name`` of ``kind`` exists; ``main`` and main's registry tag are
    taken by main whatever the kind asked."""
    catalog = repos.catalog
    try:
        if name in ("main", catalog.default_tag):
            catalog.resolve(repo_id, name, ref=True)
        else:
            catalog.resolve(repo_id, name, kind=kind)
    except RevisionNotFound:
        return False
    return True


def create_ref(repos: Repos, repo_id: str, name: str, start: str, kind: str) -> bool:
    """Tag ``start`` as the ref ``name`` of ``kind`` unless that ref exists (False), the name
    locked as a commit to it is. The refs record says what ``name`` is and where before its tag
    is written, under the repository's record lock (two refs made at once both recorded)."""
    catalog = repos.catalog
    with repos.branches.lock(repo_id, name):
        if ref_exists(repos, repo_id, name, kind):
            return False
        source = catalog.resolve(repo_id, start)
        tag = catalog.default_tag
        if name != "main":
            with repos.branches.lock(repo_id, RECORD_LOCK):
                record = read_record(source.repo)
                tag, placed = place(source, record, kind, name, catalog.default_tag)
                if placed != record:
                    write_record(source.repo, _writable(source), placed)
        _tag(source, tag)
        catalog.forget(repo_id)
        return True


def empty_branch(committer: Committer, repo_id: str, name: str, author: Author) -> None:
    """Make the branch ``name`` one commit of no file, with no parent (the Hub's empty branch,
    through the one commit path: :meth:`.Committer.empty_commit`)."""
    committer.empty_commit(repo_id, name, author, CommitRequest(summary=EMPTY_SUMMARY), {})
    committer.repos.catalog.forget(repo_id)


def move_branch(committer: Committer, repo_id: str, name: str, start: str, author: Author, empty: bool) -> None:
    """``overwrite``: the existing branch ``name`` made empty, or moved to ``start``'s commit
    (its registry tag retagged, under the branch's lock as a commit is)."""
    if empty:
        empty_branch(committer, repo_id, name, author)
        return
    repos = committer.repos
    catalog = repos.catalog
    with repos.branches.lock(repo_id, name):
        where = catalog.resolve(repo_id, name, kind=HEADS)
        _tag(catalog.resolve(repo_id, start), where.tag or catalog.default_tag)
        catalog.forget(repo_id)


def _writable(source: Resolved) -> WritableStore:
    store = source.repo.store
    if not isinstance(store, WritableStore):
        raise BadCommit(f"{source.repo.shown}: not a store serve can tag")
    return store


def _tag(source: Resolved, tag: str) -> None:
    from ocibridge.transfer.writer import retag

    retag(_writable(source), source.top, [source.repo.reference(tag)])  # the one writer: a tag is a manifest write
