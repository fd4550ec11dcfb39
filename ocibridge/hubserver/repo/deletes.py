"""Deletes with the Hub's semantics (``delete_repo``, ``delete_branch``, ``delete_tag``), over
registries that mostly cannot delete one tag; no HTTP here (the routes: ``writeroutes/deleting.py``).

A registry deletes a manifest with every tag naming it (and many refuse deletes), so serve deletes
a tag by moving it to its tombstone (:mod:`.tombstone`): the ref then names no revision on
every serve process, and the manifest it named is untagged unless another tag names it, so the
registry's garbage collection (distribution's ``garbage-collect --delete-untagged``) takes it and
the blobs only it held. A deleted repository's refs record says ``deleted`` (written first: a
crash midway leaves a repository that answers 404), then every tag of it (branches, Hub tags,
serve's commit tags, cosign's signature tags) names the tombstone: no commit id of it resolves
any more, and after GC nothing of it is left but the tombstone and the record. A repository of
that name can be created again: it starts anew (:mod:`.creation`).
"""

from __future__ import annotations

import logging

from ocibridge.errors import NotFound, RegistryError
from ocibridge.hubserver.repo.clashes import give_back
from ocibridge.hubserver.repo.commits import ProtectedRef
from ocibridge.hubserver.repo.refnames import HEADS, TAGS, other
from ocibridge.hubserver.repo.refsrecord import RECORD_LOCK, RefsRecord, read_record, record_store, write_record
from ocibridge.hubserver.repo.repos import Repos
from ocibridge.hubserver.repo.sources import Repository, RevisionNotFound, repo_parts
from ocibridge.hubserver.repo.tombstone import DESCRIPTOR
from ocibridge.oci.bookkeeping import REFS_TAG
from ocibridge.stores.base import WritableStore

log = logging.getLogger("ocibridge.hubserver")


def bury(store: WritableStore, repo: Repository, tags: list[str]) -> None:
    """Move ``tags`` to the tombstone (its one blob sent once, the manifest written per tag)."""
    from ocibridge.hubserver.repo.tombstone import BODY
    from ocibridge.transfer.writer import Blob, write_artifact

    if tags:
        write_artifact(store, DESCRIPTOR, BODY, [Blob.empty()],
                       tags=[repo.reference(tag) for tag in tags])


def home(repos: Repos, repo_id: str) -> Repository:
    """Where ``repo_id`` lives: the first source that holds it (not deleted); the Hub's
    RepoNotFound when none does (huggingface_hub says "Repository Not Found")."""
    parts = repo_parts(repo_id)
    for source in repos.catalog.sources if parts is not None else ():
        repo = source.repository(parts or [])
        if repo is None:
            continue
        try:
            tags = repo.tags()
        except (NotFound, RegistryError):
            continue
        if tags and not read_record(repo).deleted:
            return repo
    raise repos.catalog.missing(repo_id)  # as a hidden one is answered: the same words


def delete_repo(repos: Repos, repo_id: str, repo: Repository | None = None, moved_to: str = "") -> None:
    """Delete ``repo_id`` (where it lives: ``repo``, else found), its main and record locked;
    ``moved_to``: the repo id ``move_repo`` copied it to, where its reads are redirected."""
    with repos.branches.lock(repo_id, "main"), repos.branches.lock(repo_id, RECORD_LOCK):
        repo = repo or home(repos, repo_id)
        store = record_store(repo)
        old = read_record(repo)
        # first: 404 from here on (a redirect, moved)
        write_record(repo, store, RefsRecord(private=old.private, deleted=True, moved=moved_to))
        repos.catalog.forget(repo_id)
        bury(store, repo, [tag for tag in repo.tags() if tag != REFS_TAG])
        repos.catalog.forget(repo_id)
        repos.created.discard(repo_id)
    log.info("%s: deleted (%s)", repo_id, repo.shown)


def delete_ref(repos: Repos, repo_id: str, name: str, branch: bool) -> None:
    """``delete_branch`` (``branch``) or ``delete_tag`` of ``name``: the Hub's checks and texts,
    then its registry tag buried (or the other ref of that name given it back: :mod:`.clashes`)."""
    if name == "main":
        raise ProtectedRef("Cannot delete refs/heads/main" if branch
                           else "Invalid rev id: main is a branch, not a tag")
    catalog = repos.catalog
    kind = HEADS if branch else TAGS
    with repos.branches.lock(repo_id, name), repos.branches.lock(repo_id, RECORD_LOCK):
        try:
            head = catalog.resolve(repo_id, name, kind=kind)
        except RevisionNotFound:
            raise RevisionNotFound(_not_one(repos, repo_id, name, kind)) from None
        record = read_record(head.repo)
        store = record_store(head.repo)
        tag = head.tag or name
        if tag == name and name in (record.tags_aside if branch else record.branches_aside):
            bury(store, head.repo, give_back(head.repo, store, record, kind, name))  # the other gets ``name``
        else:
            bury(store, head.repo, [tag])
            if name in (record.branches if branch else record.tags):
                write_record(head.repo, store, record.without_ref(name, branch))
        catalog.forget(repo_id)
    log.info("%s: %s %s deleted", repo_id, "branch" if branch else "tag", name)


def _not_one(repos: Repos, repo_id: str, name: str, kind: str) -> str:
    """Why there is no ref ``name`` of ``kind`` to delete, in the Hub's words."""
    try:
        repos.catalog.resolve(repo_id, name, kind=other(kind))
    except RevisionNotFound:
        return f"Invalid rev id: {name}"
    return f"Invalid rev id: {name} is a {'branch' if kind == TAGS else 'tag'}"
