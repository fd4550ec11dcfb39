"""Deletes with the Hub's semantics (huggingface_hub's ``delete_repo``, ``delete_branch``,
``delete_tag``), over registries that mostly cannot delete one tag:

    DELETE /api/repos/delete                     {name, organization}: the repository
    DELETE /api/models/REPO/branch/{name}        a branch (never ``main``)
    DELETE /api/models/REPO/tag/{name}           a Hub tag

A registry deletes a manifest with every tag naming it (and many refuse deletes), so serve deletes
a tag by moving it to its tombstone (:mod:`ocibridge.hubserver.repo.tombstone`): the ref then names no revision on
every serve process, and the manifest it named is untagged unless another tag names it, so the
registry's garbage collection (distribution's ``garbage-collect --delete-untagged``) takes it and
the blobs only it held. A deleted repository's refs record says ``deleted`` (written first: a
crash midway leaves a repository that answers 404), then every tag of it (branches, Hub tags,
serve's commit tags, cosign's signature tags) names the tombstone: no commit id of it resolves
any more, and after GC nothing of it is left but the tombstone and the record. A repository of
that name can be created again: it starts anew (:mod:`.creating`).
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ocibridge.errors import NotFound, RegistryError
from ocibridge.hubserver.answers import branch_of, in_thread, requested_repo
from ocibridge.hubserver.audit import note
from ocibridge.hubserver.repo.clashes import give_back
from ocibridge.hubserver.repo.commits import ProtectedRef
from ocibridge.hubserver.repo.refnames import HEADS, TAGS, other
from ocibridge.hubserver.repo.refsrecord import RECORD_LOCK, RefsRecord, read_record, record_store, write_record
from ocibridge.hubserver.repo.sources import Repository, RevisionNotFound, repo_parts
from ocibridge.hubserver.repo.tombstone import DESCRIPTOR, EMPTY, EMPTY_JSON
from ocibridge.hubserver.writes.creating import named_repo
from ocibridge.hubserver.writes.repos import Repos
from ocibridge.oci.bookkeeping import REFS_TAG
from ocibridge.stores.base import WritableStore

log = logging.getLogger("ocibridge.hubserver")


def bury(store: WritableStore, repo: Repository, tags: list[str]) -> None:
    """Move ``tags`` to the tombstone (its one blob sent once, the manifest written per tag)."""
    from ocibridge.hubserver.repo.tombstone import BODY
    from ocibridge.transfer.writer import Blob, write_artifact

    if tags:
        write_artifact(store, DESCRIPTOR, BODY, [Blob.of_bytes(EMPTY, EMPTY_JSON)],
                       tags=[repo.reference(tag) for tag in tags])


class Deleting:
    """The delete routes, over what the write routes share."""

    def __init__(self, repos: Repos):
        self.repos = repos

    async def delete_repo(self, request: Request) -> Response:
        named = await named_repo(self.repos, request)
        if isinstance(named, Response):
            return named
        _, _, repo_id = named
        note(request, repository=repo_id)
        self.repos.writer(request, repo_id)
        await in_thread(self._delete_repo, repo_id)
        return JSONResponse({})

    def home(self, repo_id: str) -> Repository:
        """Where ``repo_id`` lives: the first source that holds it (not deleted); the Hub's
        RepoNotFound when none does (huggingface_hub says "Repository Not Found")."""
        parts = repo_parts(repo_id)
        for source in self.repos.catalog.sources if parts is not None else ():
            repo = source.repository(parts or [])
            if repo is None:
                continue
            try:
                tags = repo.tags()
            except (NotFound, RegistryError):
                continue
            if tags and not read_record(repo).deleted:
                return repo
        raise self.repos.catalog.missing(repo_id)  # as a hidden one is answered: the same words

    def _delete_repo(self, repo_id: str) -> None:
        self.delete_home(repo_id, None)

    def delete_home(self, repo_id: str, repo: Repository | None, moved_to: str = "") -> None:
        """Delete ``repo_id`` (where it lives: ``repo``, else found), its main and record locked;
        ``moved_to``: the repo id ``move_repo`` copied it to, where its reads are redirected."""
        with self.repos.branches.lock(repo_id, "main"), self.repos.branches.lock(repo_id, RECORD_LOCK):
            repo = repo or self.home(repo_id)
            store = record_store(repo)
            old = read_record(repo)
            # first: 404 from here on (a redirect, moved)
            write_record(repo, store, RefsRecord(private=old.private, deleted=True, moved=moved_to))
            self.repos.catalog.forget(repo_id)
            bury(store, repo, [tag for tag in repo.tags() if tag != REFS_TAG])
            self.repos.catalog.forget(repo_id)
            self.repos.created.discard(repo_id)
        log.info("%s: deleted (%s)", repo_id, repo.shown)

    def _not_one(self, repo_id: str, name: str, kind: str) -> str:
        """Why there is no ref ``name`` of ``kind`` to delete, in the Hub's words."""
        try:
            self.repos.catalog.resolve(repo_id, name, kind=other(kind))
        except RevisionNotFound:
            return f"Invalid rev id: {name}"
        return f"Invalid rev id: {name} is a {'branch' if kind == TAGS else 'tag'}"

    async def delete_ref(self, request: Request) -> Response:
        """``delete_branch`` and ``delete_tag``: the Hub's checks and texts, then the tag buried."""
        repo_id = requested_repo(request)
        self.repos.writer(request, repo_id)
        kind = request.path_params["kind"]
        name = branch_of(request.path_params["ref"]) if kind == "branch" else request.path_params["ref"]
        name = name.removeprefix("refs/tags/")
        await in_thread(self._delete_ref, repo_id, name, kind == "branch")
        return JSONResponse({})

    def _delete_ref(self, repo_id: str, name: str, branch: bool) -> None:
        if name == "main":
            raise ProtectedRef("Cannot delete refs/heads/main" if branch
                               else "Invalid rev id: main is a branch, not a tag")
        catalog = self.repos.catalog
        kind = HEADS if branch else TAGS
        with self.repos.branches.lock(repo_id, name), self.repos.branches.lock(repo_id, RECORD_LOCK):
            try:
                head = catalog.resolve(repo_id, name, kind=kind)
            except RevisionNotFound:
                raise RevisionNotFound(self._not_one(repo_id, name, kind)) from None
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
