"""A repository made (``create_repo``) and who sees it (``update_repo_settings``); no HTTP here
(the routes: ``writeroutes/creating.py``).

A new repository gets the Hub's first commit at once (:mod:`.initial`, through the one commit
path: :meth:`.Committer.first_commit`). A private one is recorded in its refs record before that
commit is written, so it is never readable by others for a moment. One made again over a deleted
one of its name is recorded so (``recreated``): the deleted one's commits, still in the registry
until its garbage collection, are never reached through it by digest or commit id (:mod:`.recreated`).
"""

from __future__ import annotations

import dataclasses
import logging

from ocibridge.hubserver.repo.committing import Committer
from ocibridge.hubserver.repo.ports import Author
from ocibridge.hubserver.repo.refsrecord import RECORD_LOCK, RefsRecord, read_record, record_store, write_record
from ocibridge.hubserver.repo.repos import Repos

log = logging.getLogger("ocibridge.hubserver")


def create_repo(committer: Committer, repo_id: str, author: Author, private: bool, files: dict[str, bytes]) -> bool:
    """The repository with its first commit; False when it exists. Under the lock of its
    ``main``: two creates at once are one made and one refused."""
    repos = committer.repos
    with repos.branches.lock(repo_id, "main"):
        if repos.exists(repo_id):
            return False
        repo = repos.first_repository(repo_id)
        assert repo is not None  # checked by the route
        with repos.branches.lock(repo_id, RECORD_LOCK):
            old = read_record(repo)
            # a deleted repository of that name made again: none of its commits is this one's (reborn.py)
            fresh = RefsRecord(private=private, recreated=old.deleted or old.recreated)
            if old != fresh:
                write_record(repo, record_store(repo), fresh)
        repos.catalog.forget(repo_id)
        committer.first_commit(repo_id, author, files)
        log.info("%s: created by %s%s", repo_id, author.name, " (private)" if private else "")
        return True


def set_settings(repos: Repos, repo_id: str, private: bool | None, gated: str | None) -> None:
    """Record the repository's visibility and gate (who may fetch its files), each where given
    (RepoNotFound for a repository that does not exist)."""
    head = repos.catalog.resolve(repo_id, "main")
    with repos.branches.lock(repo_id, RECORD_LOCK):
        record = read_record(head.repo)
        fresh = dataclasses.replace(record, private=record.private if private is None else private,
                                    gated=record.gated if gated is None else gated)
        if fresh != record:
            write_record(head.repo, record_store(head.repo), fresh)
    repos.catalog.forget(repo_id)
